"""The graphjobs command line: jobs, one-line user errors, help, the demo on a local cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    assert "dashboard (while the demo runs): http" in text and "n=1,024 vertices" in text
    last = text.rstrip().splitlines()[-1]
    assert last == "the cluster has stopped: graphjobs demo --keep keeps its dashboard up"
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


def test_demo_keep_serves_the_dashboard_until_ctrl_c(tmp_path):
    """--keep: the printed dashboard answers until Ctrl-C, and then the demo exits 0."""
    import re
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    cmd = [
        sys.executable,
        "-m",
        "pipelines",
        "demo",
        "--device",
        "cpu",
        "--scale",
        "8",
        "--workers",
        "1",
        "--jobs",
        "pagerank",
        "--workdir",
        str(tmp_path / "wd"),
        "--out",
        str(tmp_path / "out"),
        "--keep",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        deadline, link = time.monotonic() + 120, None
        while link is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "the demo ended before keeping its dashboard"
            if m := re.match(r"dashboard: (\S+) \(kept up until Ctrl-C\)", line):
                link = m.group(1)
        assert link, "no kept dashboard link"
        assert urllib.request.urlopen(link, timeout=10).status == 200
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)  # read what it still writes: a full pipe would block it
        assert proc.returncode == 0, rest[-3000:]
    finally:
        proc.kill()


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
    assert err == [
        "graphjobs: error: --jobs: unknown job 'pagerang'; expected some of "
        "pagerank, topk-ppr, ppr, influence, simrank"
    ]


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphjobs: error: "), lines
    return lines[0]


def test_a_file_that_cannot_be_opened_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "missing.yaml"]) == 1  # open() raises: the file and the system's reason
    line = _one_error_line(capsys.readouterr().err)
    assert line == "graphjobs: error: missing.yaml: No such file or directory"
    args = ["ppr", "rmat:8", "--sources", "ids.txt", "--workdir", str(tmp_path / "wd"), "--device", "cpu"]
    assert main(args) == 1
    assert "ids.txt: no such file" in _one_error_line(capsys.readouterr().err)
    assert main(["pagerank", "nope.txt", "--workdir", str(tmp_path / "wd")]) == 1
    assert "nope.txt: no such file" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pagerank", "rmat:8", "--alpha", "2"], "alpha must be in [0, 1], got 2.0"),
        (["pagerank", "rmat:8", "--partitions", "0"], "partitions must be 'auto' or an int >= 1, got 0"),
        (["ppr", "rmat:8", "--random", "3", "--chunk", "0"], "chunk must be an integer >= 1, got 0"),
        (["pagerank", "rmat:scale=99"], "scale must be in 1..31, got 99"),
        (["pagerank", "rmat:8", "--connect-timeout", "1"], "--connect-timeout applies only with --scheduler"),
    ],
)
def test_a_bad_option_value_is_one_line_and_exit_1(tmp_path, capsys, args, message):
    code = main([*args, "--workdir", str(tmp_path / "wd"), "--out", str(tmp_path / "o"), "--quiet"])
    assert code == 1 and message in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pagerank"], "graphjobs pagerank: error: the following arguments are required: input"),
        (["pagerank", "e.txt", "--alpah", "0.9"], "graphjobs: error: unrecognized arguments: --alpah 0.9"),
        (["ppr", "e.txt", "--random", "3", "--method", "fast"], "argument --method: invalid choice: 'fast'"),
        (["pagerank", "e.txt", "--max-iter", "many"], "argument --max-iter: invalid int value: 'many'"),
        (["pagerang", "e.txt"], "argument command: invalid choice: 'pagerang'"),
    ],
)
def test_usage_errors_exit_1_with_the_usage_and_one_line(capsys, args, message):
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and lines[0].startswith("usage: graphjobs")
    assert message in lines[-1] and lines[-1].startswith("graphjobs")
    assert sum("error:" in line for line in lines) == 1


def test_a_bug_shows_its_traceback_and_exits_2(tmp_path, capsys, monkeypatch):
    """A KeyError inside a job is a bug, not a user error: its traceback, status 2 (not one line, 1)."""
    import pipelines.ppr

    def broken(graph, parts, out, opts):
        raise KeyError("first")

    monkeypatch.setattr(pipelines.ppr, "_summary", broken)
    args = [
        "ppr",
        "rmat:8",
        "--random",
        "2",
        "--device",
        "cpu",
        "--quiet",
        "--workdir",
        str(tmp_path / "wd"),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'first'" in err
    assert "graphjobs: error:" not in err and "internal error (please report it" in err


@pytest.mark.parametrize("where", [[], ["--cluster"]])
def test_json_prints_exactly_one_document_on_stdout(tmp_path, capsys, where):
    """With --json stdout holds the summary and nothing else, also with a local cluster (whose dashboard
    line goes to stderr)."""
    out = str(tmp_path / "p.parquet")
    args = [
        "pagerank",
        "rmat:scale=8,seed=3",
        "--json",
        "--device",
        "cpu",
        "--out",
        out,
        "--workdir",
        str(tmp_path / "wd"),
        *where,
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # the whole of stdout: one JSON document
    assert summary["job"] == "pagerank" and summary["n"] == 256 and summary["out"] == out
    assert len(summary["top"]) == 10 and summary["memory"]["partitions"] == 1
    assert summary["cached"] == {"pagerank": False, "output": False} and summary["device"] == "cpu"
    df = pd.read_parquet(out)
    best = df.sort_values("pagerank", ascending=False, kind="stable").head(10)
    assert [v for v, _ in summary["top"]] == best.vertex.tolist()
    if where:
        assert "graphjobs: Dask dashboard at http" in captured.err


def test_version(tmp_path):
    import tomllib
    from importlib.metadata import version

    want = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    done = subprocess.run([sys.executable, "-m", "pipelines", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"graphjobs {version('graphjobs')}\n"
    assert version("graphjobs") == want["version"]
    from pipelines import cli

    assert cli.version() == want["version"]


def _parse(args):
    from pipelines.cli import parser

    return parser().parse_args(args)


@pytest.mark.parametrize(
    ("args", "k"),
    [
        (["ppr", "e.txt", "--random", "3"], 100),
        (["ppr", "e.txt", "--random", "3", "-k", "5"], 5),
        (["ppr", "e.txt", "--random", "3", "--k", "5"], 5),
        (["topk-ppr", "--index", "i", "--random", "3", "--k", "7"], 7),
        (["topk-ppr", "--index", "i", "--random", "3", "-k", "7"], 7),
        (["simrank", "e.txt", "--random", "3", "--k", "9"], 9),
        (["influence", "e.txt", "--k", "4"], 4),
        (["influence", "e.txt", "-k", "4"], 4),
    ],
)
def test_k_is_one_flag_on_every_command_with_a_count_of_answers(capsys, args, k):
    assert _parse(args).k == k
    assert capsys.readouterr().err == ""


def test_former_spellings_still_work_with_a_warning_and_a_help_note(capsys):
    assert _parse(["ppr", "e.txt", "--random", "3", "--topk", "6"]).k == 6
    assert "graphjobs: warning: --topk is deprecated; use -k" in capsys.readouterr().err
    assert _parse(["pagerank", "e.txt", "--reorder", "in_degree"]).order == "in_degree"
    assert "graphjobs: warning: --reorder is deprecated; use --order" in capsys.readouterr().err
    assert _parse(["pagerank", "e.txt", "--order", "degree"]).order == "degree"
    assert _parse(["pagerank", "e.txt"]).order is None
    assert capsys.readouterr().err == ""
    for command, note in (("ppr", "--topk K"), ("pagerank", "--reorder {degree,in_degree,out_degree}")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert note in text and "deprecated spelling of" in text


@pytest.mark.parametrize("command", [["ppr", "e.txt"], ["topk-ppr", "--index", "i"], ["simrank", "e.txt"]])
def test_source_is_repeatable_on_every_command_with_sources(command):
    args = _parse([*command, "--source", "0"])
    assert args.source == ["0"] and args.sources is None and args.random is None
    assert _parse([*command, "--source", "0", "--source", "x"]).source == ["0", "x"]
    assert _parse([*command, "--sources", "ids.txt"]).sources == "ids.txt"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["ppr", "e.txt", "--random", "3", "--sour", "0"],
            "unrecognized arguments: --sour 0",
        ),  # no abbreviations
        (["pagerank", "e.txt", "--alph", "0.9"], "unrecognized arguments: --alph 0.9"),
        (
            ["ppr", "e.txt", "--source", "0", "--random", "3"],
            "argument --random: not allowed with argument --source",
        ),
        (["simrank", "e.txt", "--source", "0", "--sources", "f"], "not allowed with argument --source"),
    ],
)
def test_options_are_never_abbreviated_and_sources_are_one_of_three(capsys, args, message):
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 1 and message in capsys.readouterr().err


def test_ppr_source_0_is_a_label_not_a_file(tmp_path, capsys):
    """``ppr --source 0`` was read as ``--sources 0`` ("0: no such file"): now the label 0, repeatable."""
    import graphs
    import operators

    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n0 2\n1 2\n2 0\n3 2\n")
    out = tmp_path / "o"
    base = [
        "--out",
        str(out),
        "--workdir",
        str(tmp_path / "wd"),
        "--quiet",
        "--device",
        "cpu",
        "--tol",
        "1e-10",
    ]
    assert main(["ppr", str(edges), "--source", "0", "--source", "3", "-k", "2", *base]) == 0
    rows = pd.read_parquet(out).sort_values(["source", "rank"])
    g = graphs.read_edgelist(str(edges))
    want = operators.ppr(g, [0, 3], topk=2, tol=1e-10, as_frame=True)
    assert rows["source"].tolist() == [0, 0, 3, 3] == want["source"].tolist()
    assert rows["vertex"].tolist() == want["vertex"].tolist()
    assert rows["ppr"].to_numpy() == pytest.approx(want["ppr"].to_numpy(), abs=1e-9)
    assert main(["ppr", str(edges), "--source", "9", "-k", "2", "--overwrite", *base]) == 1
    assert "--source: vertex 9 is not in the graph" in _one_error_line(capsys.readouterr().err)
