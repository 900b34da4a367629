"""The graphjobs command line: jobs, one-line user errors, help, the demo on a local cluster."""

from __future__ import annotations

import os
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
    first = capsys.readouterr().out
    assert "written:" in first and "(PageRank 0." in first
    # a re-run finds the stage's artifact: it says so rather than a time of 0
    assert (
        main(["pagerank", str(edges), "--out", str(out), "--workdir", str(tmp_path / "wd"), "--quiet"]) == 0
    )
    assert "(PageRank found in the workdir)" in capsys.readouterr().out


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


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_as_input_is_refused_with_what_to_do(tmp_path, capsys):
    fifo = tmp_path / "edges"
    os.mkfifo(fifo)  # what a shell's <(zcat ...) hands over: workers cannot read it, nor read it twice
    args = ["--workdir", str(tmp_path / "wd"), "--out", str(tmp_path / "o.pq")]
    assert main(["pagerank", str(fifo), *args]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "edges: not a regular file (a pipe?)" in err[0]
    assert "write it to a file" in err[0]


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


def test_demo_runs_every_job_on_a_local_cluster(tmp_path, capsys, monkeypatch):
    import numpy as np

    import graphs
    import operators

    monkeypatch.chdir(tmp_path)
    args = ["demo", "--device", "cpu", "--scale", "10", "--workers", "1", "--workdir", str(tmp_path / "wd")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "dashboard: http" in text and "n=1,024 vertices" in text
    titles = [line for line in text.splitlines() if line.startswith("== ")]
    for title, words in zip(titles, ("global PageRank", "kPAR", "hybrid", "IMM", "ClipSim"), strict=True):
        assert words in title
    out, g = tmp_path / "graphjobs-demo", graphs.rmat(10, seed=0)
    pr = pd.read_parquet(out / "pagerank.parquet")
    assert len(pr) == 1024 and np.abs(pr.pagerank.to_numpy() - operators.pagerank(g)[pr.vertex]).sum() < 1e-9
    rows = {}
    for name, value, sources in (("topk-ppr", "ppr", 64), ("ppr", "ppr", 64), ("simrank", "simrank", 10)):
        df = pd.read_parquet(out / name).sort_values(["source", "rank"])
        assert df.source.nunique() == sources and (df.groupby("source").size() == 10).all()
        assert (df.groupby("source")[value].diff().dropna() <= 0).all() and df[value].between(0, 1).all()
        rows[name] = df
    # both jobs' rows against power-iteration PPR on 50 sources: the true top 10, values close
    from operators.ppr.metrics import precision_at_k

    for name in ("topk-ppr", "ppr"):
        src = np.sort(rows[name].source.unique())[:50]
        truth = operators.ppr(g, src, method="power", tol=1e-12)
        df = rows[name][rows[name].source.isin(src)]
        at = np.searchsorted(src, df.source.to_numpy())
        assert np.abs(df.ppr.to_numpy() - truth[at, df.vertex]).max() < 2e-3
        hits = [precision_at_k(truth[i], df.vertex[at == i].to_numpy(), 10) for i in range(src.size)]
        assert np.mean(hits) >= 0.95
    seeds = pd.read_csv(out / "seeds.csv")
    assert len(seeds) == 10 and seeds.vertex.is_unique


def test_demo_outputs_agree_on_one_and_two_workers(tmp_path, monkeypatch):
    """Every job of the demo writes the same output on 1 and on 2 workers (benchmarks.compare_demo, which
    benchmarks/gpu.sh democheck runs on GPUs), and the comparison catches one vertex or value changed."""
    from benchmarks.compare_demo import compare

    monkeypatch.chdir(tmp_path)
    for w in (1, 2):
        wd, out = str(tmp_path / f"wd{w}"), str(tmp_path / f"out{w}")
        assert (
            main(
                [
                    "demo",
                    "--device",
                    "cpu",
                    "--scale",
                    "10",
                    "--workers",
                    str(w),
                    "--workdir",
                    wd,
                    "--out",
                    out,
                ]
            )
            == 0
        )
    found = compare(tmp_path / "out1", tmp_path / "out2")
    assert [what.split(":")[0] for _, what in found] == [
        "pagerank",
        "topk-ppr",
        "ppr",
        "simrank",
        "influence",
    ]
    assert all(ok for ok, _ in found), found
    df = pd.read_parquet(tmp_path / "out2" / "ppr")
    for change in ("vertex", "value"):
        bad = df.copy()
        if change == "vertex":  # a kept vertex replaced by one its source did not keep
            row = bad.index[0]
            bad.loc[row, "vertex"] = max(set(range(1024)) - set(bad.vertex[bad.source == bad.source[row]]))
        else:
            bad.loc[bad.index[0], "ppr"] *= 1.001
        (tmp_path / change / "ppr").mkdir(parents=True)
        bad.to_parquet(tmp_path / change / "ppr" / "part.parquet")
        ((ok, what),) = compare(tmp_path / "out1", tmp_path / change)
        assert not ok and what.startswith("ppr"), what


def test_demo_refuses_an_unknown_job_before_starting_a_cluster(capsys):
    assert main(["demo", "--device", "cpu", "--jobs", "pagerank,pagerang"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["graphjobs: error: --jobs: unknown job 'pagerang'; expected some of "
                   "pagerank, topk-ppr, ppr, influence, simrank"]  # fmt: skip
