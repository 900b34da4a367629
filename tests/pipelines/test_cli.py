"""The graphjobs command line: jobs, one-line user errors, help, the demo on a local cluster."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from pipelines.cli import main


def test_pagerank_command(tmp_path, capsys):
    edges = tmp_path / "e.csv"
    edges.write_text("src,dst\nx,y\ny,z\nz,x\n")
    out = tmp_path / "r.parquet"
    assert (
        main(["pagerank", str(edges), "--out", str(out), "--workdir", str(tmp_path / "wd"), "--quiet"]) == 0
    )
    df = pd.read_parquet(out)
    assert sorted(df.vertex) == ["x", "y", "z"] and abs(df.pagerank.sum() - 1) < 1e-12
    assert "written:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ("1 2\n2 x\n", [], "line 2: expected an integer vertex id"),
        ("1 2\n2 3\n", ["--alpha", "2"], "alpha must be in [0, 1]"),
        ("1 2\n2 3\n3 1\n3 4\n", ["--max-iter", "1", "--tol", "1e-12"], "did not converge"),
    ],
)
def test_user_errors_are_one_line(tmp_path, capsys, text, args, message):
    edges = tmp_path / "e.txt"
    edges.write_text(text)
    code = main(
        [
            "pagerank",
            str(edges),
            "--workdir",
            str(tmp_path / "wd"),
            "--out",
            str(tmp_path / "o.pq"),
            "--quiet",
            *args,
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("graphjobs: error:") and message in err[0]
    assert main(["pagerank", str(tmp_path / "nope.txt")]) == 1


def test_scheduler_connect_timeout(tmp_path, capsys):
    edges = tmp_path / "e.txt"
    edges.write_text("1 2\n2 3\n")
    out = tmp_path / "o.pq"
    base = ["pagerank", str(edges), "--workdir", str(tmp_path / "wd"), "--out", str(out), "--quiet"]
    # nothing listens on port 1: one line naming the address and the timeout given
    assert main([*base, "--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no Dask scheduler answered at 'tcp://127.0.0.1:1'" in err[0] and "1 s" in err[0]
    assert main([*base, "--connect-timeout", "1"]) == 1
    assert "--connect-timeout applies only with --scheduler" in capsys.readouterr().err
    assert not out.exists()


def test_help_and_module_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "pipelines", "pagerank", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "examples:" in out.stdout and "--scheduler" in out.stdout


def test_demo_runs_on_a_local_cluster(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(["demo", "--device", "cpu", "--scale", "10", "--workers", "1", "--workdir", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    assert "dashboard: http" in out and "n=1,024 vertices" in out
    assert len(pd.read_parquet(tmp_path / "demo-pagerank.parquet")) == 1024
