"""Sources given as text (a file, or --source): typed as the graph's labels; errors name the file and line."""

from __future__ import annotations

import io
import json
import os
import threading

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from dask.base import tokenize

import pipelines
from graphs import GraphFormatError
from pipelines import SourceText
from pipelines.cli import main


def test_text_labels_take_the_type_of_the_graphs_labels(tmp_path, sync):
    path = tmp_path / "e.txt"
    path.write_text("1 a\na b\nb 1\nb c\n")  # string labels, one of them "1"
    (tmp_path / "s.txt").write_text("# sources\n1\n\nb\n")
    src = SourceText.read(tmp_path / "s.txt")
    assert (src.items, src.lines) == (["1", "b"], [2, 4])
    # the job's token follows the labels, not the file's path (a re-run from elsewhere resumes)
    assert tokenize(src) == tokenize(SourceText(["1", "b"])) != tokenize(SourceText(["1", "c"]))
    job = pipelines.ppr_job(path, src, out=tmp_path / "o", workdir=tmp_path / "wd", topk=4, method="power")
    pipelines.run(job, progress=False)
    df = pd.read_parquet(tmp_path / "o")
    assert sorted(set(df.source)) == ["1", "b"]
    g = nx.DiGraph([("1", "a"), ("a", "b"), ("b", "1"), ("b", "c")])
    for s, rows in df.groupby("source"):
        want = nx.pagerank(g, alpha=0.8, personalization={s: 1}, tol=1e-12)
        assert dict(zip(rows.vertex, rows.ppr, strict=True)) == pytest.approx(want, abs=1e-6)
    # the same text against a graph of integer labels reads integers
    ints = tmp_path / "i.txt"
    ints.write_text("0 1\n1 2\n2 0\n")
    (tmp_path / "t.txt").write_text("2\n0\n")
    job = pipelines.ppr_job(ints, SourceText.read(tmp_path / "t.txt"), out=tmp_path / "o2", workdir=tmp_path)
    pipelines.run(job, progress=False)
    assert sorted(set(pd.read_parquet(tmp_path / "o2").source)) == [0, 2]


@pytest.mark.parametrize(
    "text, message",
    [
        ("0\n\n# c\n7\n8\n", r"s.txt, line 4: vertex 7 is not in the graph \(2 of the 3 labels are not\)"),
        ("0\n-1\n", r"s.txt, line 2: vertex -1 is not in the graph$"),
        ("0\nfoo\n", r"s.txt, line 2: expected an integer vertex label, got 'foo'"),
        ("1\n2.0\n", r"s.txt, line 2: expected an integer vertex label, got '2.0'"),
        ("2\n99999999999999999999\n", r"s.txt, line 2: expected an integer vertex label"),
    ],
)
def test_bad_source_files_name_the_line(tmp_path, sync, text, message):
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n2 0\n")
    (tmp_path / "s.txt").write_text(text)
    job = pipelines.ppr_job(edges, SourceText.read(tmp_path / "s.txt"), out=tmp_path / "o", workdir=tmp_path)
    with pytest.raises(GraphFormatError, match=message):
        pipelines.run(job, progress=False)
    assert not (tmp_path / "o").exists()


def test_source_file_and_flag_errors_from_the_command_line(tmp_path, capsys):
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n2 0\n")
    (tmp_path / "none.txt").write_text("# nothing\n\n")
    with pytest.raises(GraphFormatError, match=r"none\.txt: expected source labels, one per line"):
        SourceText.read(tmp_path / "none.txt")
    with pytest.raises(FileNotFoundError, match=r"nope\.txt: no such file"):
        SourceText.read(tmp_path / "nope.txt")
    base = ["--out", str(tmp_path / "o"), "--workdir", str(tmp_path / "wd"), "--quiet", "--device", "cpu"]
    assert main(["simrank", str(edges), "--source", "9", *base]) == 1
    assert "--source: vertex 9 is not in the graph" in capsys.readouterr().err
    assert main(["ppr", str(edges), "--sources", str(tmp_path / "nope.txt"), *base]) == 1
    assert "nope.txt: no such file" in capsys.readouterr().err
    assert main(["simrank", str(edges), "--source", "2", "-k", "2", *base]) == 0


def test_sources_from_standard_input_a_pipe_and_not_a_directory(tmp_path, monkeypatch, capsys):
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n2 0\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("# header\n2\n\n0\n"))
    got = SourceText.read("-")
    assert (got.items, got.lines, got.origin) == (["2", "0"], [2, 4], "<stdin>")
    monkeypatch.setattr("sys.stdin", io.StringIO("1\nx\n"))
    with pytest.raises(GraphFormatError, match=r"<stdin>, line 2: expected an integer vertex label, got 'x'"):
        SourceText.read("-").labels_for("i")
    if hasattr(os, "mkfifo"):  # what a shell's <(...) hands over: not a regular file
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        writer = threading.Thread(target=lambda: fifo.write_text("1\n2\n"))
        writer.start()
        got = SourceText.read(str(fifo))
        writer.join()
        assert got.items == ["1", "2"]
    with pytest.raises(IsADirectoryError, match=r"a directory \(expected a file of source labels"):
        SourceText.read(tmp_path)
    base = ["--out", str(tmp_path / "o"), "--workdir", str(tmp_path / "wd"), "--quiet", "--device", "cpu"]
    monkeypatch.setattr("sys.stdin", io.StringIO("2\n0\n"))
    assert main(["ppr", str(edges), "--sources", "-", "-k", "2", *base]) == 0
    rows = pd.read_parquet(tmp_path / "o")
    assert sorted(set(rows["source"])) == [0, 2]
    monkeypatch.setattr("sys.stdin", io.StringIO("7\n"))
    assert main(["ppr", str(edges), "--sources", "-", "-k", "2", "--overwrite", *base]) == 1
    assert "<stdin>, line 1: vertex 7 is not in the graph" in capsys.readouterr().err


def test_a_bare_integer_is_refused_and_random_sources_are_explicit(tmp_path, sync):
    path = tmp_path / "i.txt"
    path.write_text("".join(f"{u} {u + 1}\n" for u in range(1, 12)))  # labels 1..12, none of them 0
    # operators read an int as one vertex; jobs once read it as that many random ones: now neither guess
    for build in (pipelines.ppr_job, pipelines.simrank_job, pipelines.topk_ppr_job):
        for bare in (5, np.int64(5)):
            with pytest.raises(
                ValueError, match=r"sources=5 is ambiguous: pass RandomSources\(5\) .* or \[5\]"
            ):
                build(path, bare, out=tmp_path / "never", workdir=tmp_path)
    assert not (tmp_path / "never").exists()
    for bad in (0, -2, True, 2.5):
        with pytest.raises(ValueError, match="random sources must be an integer >= 1"):
            pipelines.RandomSources(bad)
    job = pipelines.ppr_job(path, [5], out=tmp_path / "one", workdir=tmp_path, topk=3)
    pipelines.run(job, progress=False)
    assert set(pd.read_parquet(tmp_path / "one").source) == {5}  # the vertex labelled 5
    job = pipelines.ppr_job(path, pipelines.RandomSources(5), out=tmp_path / "five", workdir=tmp_path, topk=3)
    drawn = set(pd.read_parquet(pipelines.run(job, progress=False)["out"]).source)
    assert len(drawn) == 5 and drawn <= set(range(1, 13))


def test_random_sources_among_vertices_with_out_or_in_edges(tmp_path, sync, capsys):
    from pipelines.sources import resolve_sources, sources_spec
    from pipelines.stages import load_stage

    path = tmp_path / "star.txt"
    path.write_text("".join(f"0 {v}\n" for v in range(1, 9)) + "9 0\n10 10\n")  # out-edges: 0, 9, 10 only
    handle = dask_compute(load_stage(str(path), workdir=tmp_path / "wd")[0])
    g = handle.get("cpu")
    has_out, has_in = set(np.flatnonzero(g.out_degree() > 0)), set(np.flatnonzero(g.in_degree() > 0))
    assert len(has_out) == 3 and len(has_in) == 10
    for seed in range(20):
        out = resolve_sources(handle, sources_spec(pipelines.RandomSources(3, among="out"), seed)[0])
        assert set(out.tolist()) == has_out
        assert (
            set(resolve_sources(handle, sources_spec(pipelines.RandomSources(2, among="in"), seed)[0]))
            <= has_in
        )
    # "all" keeps the draw (and the token, so finished chunks of earlier runs resume) of before
    spec = sources_spec(pipelines.RandomSources(4), 7)[0]
    assert spec == ("random", 4, 7)
    assert np.array_equal(
        resolve_sources(handle, spec), np.random.default_rng(7).choice(11, 4, replace=False)
    )
    assert tokenize(spec) != tokenize(sources_spec(pipelines.RandomSources(4, among="out"), 7)[0])
    with pytest.raises(
        ValueError, match="4 random sources asked for, but the graph has only 3 vertices with out-edges"
    ):
        resolve_sources(handle, sources_spec(pipelines.RandomSources(4, among="out"), 0)[0])
    with pytest.raises(ValueError, match="among must be one of 'all', 'out', 'in', got 'both'"):
        pipelines.RandomSources(2, among="both")
    # the command line and a job file say the same
    base = ["--out", str(tmp_path / "o"), "--workdir", str(tmp_path / "wd"), "--quiet", "-k", "2"]
    assert main(["ppr", str(path), "--random", "3", "--random-among", "out", *base]) == 0
    assert set(pd.read_parquet(tmp_path / "o").source) == {0, 9, 10}
    assert main(["ppr", str(path), "--sources", str(path), "--random-among", "out", *base]) == 1
    assert "--random-among applies only with --random" in capsys.readouterr().err
    from pipelines.spec import _sources

    assert _sources({"random": 3, "among": "in"}, tmp_path, "j.yaml").among == "in"
    with pytest.raises(ValueError, match=r"\{random: N, among: out\}"):
        _sources({"random": 3, "among": "sideways"}, tmp_path, "j.yaml")


def dask_compute(x):
    import dask

    return dask.compute(x)[0]


@pytest.mark.parametrize("command", [["ppr", "-k"], ["simrank", "-k"]])
def test_more_rows_per_source_than_vertices_is_refused_naming_n(tmp_path, capsys, command):

    edges = tmp_path / "e.txt"
    edges.write_text("1 2\n2 3\n3 1\n3 4\n")
    (tmp_path / "s.txt").write_text("1\n")
    job, flag = command
    base = [
        job,
        str(edges),
        "--sources",
        str(tmp_path / "s.txt"),
        "--workdir",
        str(tmp_path / "wd"),
        "--quiet",
    ]
    assert main([*base, flag, "5", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    name = "topk" if job == "ppr" else "k"  # the job's parameter (ppr_job's topk is the CLI's -k)
    assert err == [
        f"graphjobs: error: {name}=5 is more than the graph's 4 vertices (a source has at most 4 rows); "
        f"ask for {name} <= 4"
    ]
    assert not (tmp_path / "o").exists()
    assert main([*base, flag, "4", "--out", str(tmp_path / "o")]) == 0


def test_a_source_listed_again_is_answered_once_and_counted(tmp_path, capsys):

    edges = tmp_path / "e.txt"
    edges.write_text("1 2\n2 3\n3 1\n3 4\n")
    (tmp_path / "s.txt").write_text("3\n3\n1\n3\n")
    args = ["ppr", str(edges), "--sources", str(tmp_path / "s.txt"), "-k", "4", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "o"), "--workdir", str(tmp_path / "wd"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["queries"] == 2 and summary["duplicate_sources"] == 2
    rows = pd.read_parquet(tmp_path / "o")
    assert rows.source.tolist() == [3] * 4 + [1] * 4  # in the order given, each once
    assert main([*args, "--out", str(tmp_path / "o2"), "--workdir", str(tmp_path / "wd")]) == 0
    assert "2 repeated sources dropped (each source is answered once)" in capsys.readouterr().out
    job = pipelines.ppr_job(edges, [4, 4, 2], out=tmp_path / "o3", workdir=tmp_path / "wd", topk=4)
    assert pipelines.run(job, progress=False)["duplicate_sources"] == 1
