"""The PageRank job: values, keys, cached stages, labels, errors; sync scheduler and a real cluster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import graphs
import operators
import pipelines
from pipelines import _state
from tests.conftest import TextStream, as_vector, dataset_path


def ranks_by_label(path):
    df = pd.read_parquet(path)
    assert list(df.columns) == ["vertex", "pagerank"]
    return dict(zip(df.vertex.tolist(), df.pagerank.tolist(), strict=True))


def write_edges(tmp_path, text, name="edges.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_job_values_keys_and_labels(tmp_path, sync):
    path = write_edges(tmp_path, "# comment\nann bob\nbob cid\ncid ann\ncid dan\n")
    job = pipelines.pagerank_job(path, out=tmp_path / "pr.parquet", workdir=tmp_path / "wd", alpha=0.9)
    assert sorted(k.rsplit("-", 1)[0] for k in job.keys()) == [
        "graphjobs-load",
        "graphjobs-pagerank",
        "graphjobs-write-pagerank",
    ]
    summary = pipelines.run(job, progress=False)
    g = graphs.read_edgelist(path)
    expected = operators.pagerank(g, alpha=0.9)
    got = ranks_by_label(tmp_path / "pr.parquet")
    np.testing.assert_allclose(as_vector(g, got), expected, atol=1e-15)
    assert summary["n"] == 4 and summary["top"][0][0] == max(got, key=got.get)


def test_a_damaged_earlier_result_is_written_again_with_a_warning(tmp_path, sync, capsys):
    """An output whose footer still names this job but whose values changed is not kept as the result."""
    out = tmp_path / "pr.parquet"
    job = lambda: pipelines.pagerank_job("rmat:scale=9,seed=2", out=out, workdir=tmp_path / "wd")  # noqa: E731
    pipelines.run(job(), progress=False)
    clean = out.read_bytes()
    data = bytearray(clean)
    data[len(data) // 2] ^= 0xFF  # in the values: the footer (the job's token) is intact
    out.write_bytes(bytes(data))
    capsys.readouterr()
    again = pipelines.run(job(), progress=False)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"graphjobs: warning: {out}: the earlier result") and line.endswith(
        "writing it again"
    )
    assert again["cached"] == {"pagerank": True, "output": False} and out.read_bytes() == clean


def test_rerun_skips_finished_stages_and_parameters_change_tokens(tmp_path, sync, monkeypatch):
    kw = dict(out=tmp_path / "pr.parquet", workdir=tmp_path / "wd")
    first = pipelines.run(pipelines.pagerank_job("rmat:scale=9,seed=2", **kw), progress=False)
    assert first["cached"] == {"pagerank": False, "output": False}

    def fail(*a, **k):
        raise AssertionError("the cached PageRank stage ran again")

    monkeypatch.setattr(operators, "pagerank", fail)
    again = pipelines.run(pipelines.pagerank_job("rmat:scale=9,seed=2", **kw), progress=False)
    assert again["cached"] == {"pagerank": True, "output": True} and again["top"] == first["top"]
    kw["overwrite"] = True  # jobs built over the first one's result, only to compare their keys
    a, b = pipelines.pagerank_job("rmat:9", **kw), pipelines.pagerank_job("rmat:9", alpha=0.5, **kw)
    keys = lambda job: {k.rsplit("-", 1)[0]: k for k in job.keys()}  # noqa: E731
    assert keys(a)["graphjobs-load"] == keys(b)["graphjobs-load"]
    assert keys(a)["graphjobs-pagerank"] != keys(b)["graphjobs-pagerank"]


def test_reorder_at_load_keeps_results_by_label(tmp_path, sync):
    kw = dict(workdir=tmp_path / "wd")
    pipelines.run(
        pipelines.pagerank_job("rmat:scale=9,seed=3", out=tmp_path / "a.parquet", **kw), progress=False
    )
    job = pipelines.pagerank_job("rmat:scale=9,seed=3", reorder="degree", out=tmp_path / "b.parquet", **kw)
    pipelines.run(job, progress=False)
    a, b = ranks_by_label(tmp_path / "a.parquet"), ranks_by_label(tmp_path / "b.parquet")
    assert a.keys() == b.keys() and max(abs(a[k] - b[k]) for k in a) < 1e-15
    with pytest.raises(ValueError, match="reorder must be"):
        pipelines.pagerank_job("rmat:9", reorder="random")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("rmat:16,foo=1", r"unknown option 'foo'; rmat takes scale, edge_factor"),
        ("rmat:16,3", r"unknown option '3'"),
        ("rmat:scale=x", r"'x' is not a number"),
        ("ba:n=100", r"ba needs m"),
        ("er:", r"er needs n"),
    ],
)
def test_generator_specs_are_checked_when_the_job_is_built(tmp_path, spec, message):
    with pytest.raises(ValueError, match=message):  # before any task, not a TypeError inside one
        pipelines.pagerank_job(spec, out=tmp_path / "o.parquet", workdir=tmp_path)


def test_an_output_path_holding_anything_else_is_refused(tmp_path, sync):
    edges = tmp_path / "edges.parquet"
    pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0]}).to_parquet(edges)
    before = edges.read_bytes()
    for out in (edges, write_edges(tmp_path, "notes\n", "notes.txt")):  # its own input, any other file
        with pytest.raises(FileExistsError, match="not the output of a graphjobs pagerank job"):
            pipelines.pagerank_job(edges, out=out, workdir=tmp_path)
    assert edges.read_bytes() == before
    with pytest.raises(IsADirectoryError, match="is a folder"):
        pipelines.pagerank_job(edges, out=tmp_path, workdir=tmp_path)
    with pytest.raises(NotADirectoryError, match=r"edges\.parquet: exists and is not a folder"):
        pipelines.index_job(edges, out=edges)  # an index folder (the job's work folder) over a file
    out = tmp_path / "pr.parquet"
    pipelines.run(pipelines.pagerank_job(edges, alpha=0.85, out=out, workdir=tmp_path), progress=False)
    with pytest.raises(FileExistsError, match="holds the result of another pagerank job"):
        pipelines.pagerank_job(
            edges, alpha=0.5, out=out, workdir=tmp_path
        )  # another job's: only with overwrite
    job = pipelines.pagerank_job(edges, alpha=0.5, out=out, workdir=tmp_path, overwrite=True)
    pipelines.run(job, progress=False)
    assert ranks_by_label(out) == pytest.approx(dict(enumerate([1 / 3] * 3)))


def test_changed_input_file_is_read_again(tmp_path, sync):
    path = write_edges(tmp_path, "1 2\n2 3\n")
    kw = dict(out=tmp_path / "pr.parquet", workdir=tmp_path / "wd", overwrite=True)  # a result of other input
    pipelines.run(pipelines.pagerank_job(path, **kw), progress=False)
    path.write_text("1 2\n2 3\n3 4\n")
    summary = pipelines.run(pipelines.pagerank_job(path, **kw), progress=False)
    assert summary["n"] == 4 and set(ranks_by_label(tmp_path / "pr.parquet")) == {1, 2, 3, 4}


def test_graph_is_loaded_once_per_process(tmp_path, sync):
    _state.clear()
    job = pipelines.pagerank_job("rmat:scale=8,seed=1", out=tmp_path / "o.parquet", workdir=tmp_path / "wd")
    pipelines.run(job, progress=False)
    assert len([k for k in _state.loaded() if k[1] == "cpu"]) == 1


def test_the_worker_graph_keeps_no_transpose_after_pagerank(tmp_path, sync):
    """The stages after PageRank (an index build) hold the worker's graph without its transpose beside it."""
    _state.clear()
    job = pipelines.pagerank_job("rmat:scale=8,seed=1", out=tmp_path / "o.parquet", workdir=tmp_path / "wd")
    pipelines.run(job, progress=False)
    (g,) = _state._GRAPHS.values()
    assert not g.has_derived("transpose")
    ref = operators.pagerank(graphs.rmat(8, seed=1), alpha=0.85)
    got = pd.read_parquet(tmp_path / "o.parquet")
    np.testing.assert_allclose(got.sort_values("vertex").pagerank.to_numpy(), ref, atol=1e-6)


def test_personalization_and_snap_file_against_networkx(tmp_path, sync):
    path = dataset_path("wiki-Vote.txt.gz")
    if path is None:
        pytest.skip("datasets folder absent")
    import networkx as nx

    from tests.conftest import to_networkx

    g = graphs.read_edgelist(path)
    pers = {30: 1.0, 3: 2.0}
    job = pipelines.pagerank_job(
        path, personalization=pers, out=tmp_path / "p.parquet", workdir=tmp_path / "wd"
    )
    pipelines.run(job, progress=False)
    ref = nx.pagerank(to_networkx(g), personalization=pers)
    got = ranks_by_label(tmp_path / "p.parquet")
    assert sum(abs(got[k] - ref[k]) for k in ref) < 1e-6


def test_bad_input_raises_the_format_error(tmp_path, sync):
    path = write_edges(tmp_path, "1 2\n3 x\n")
    job = pipelines.pagerank_job(path, out=tmp_path / "o.parquet", workdir=tmp_path / "wd")
    with pytest.raises(graphs.GraphFormatError, match="line 2"):
        pipelines.run(job, progress=False)
    with pytest.raises(FileNotFoundError):
        pipelines.pagerank_job(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="unknown read options"):
        pipelines.pagerank_job(path, read_options={"colour": 1})


def test_on_a_real_local_cluster(tmp_path):
    from distributed import Client

    from cluster import make_cluster

    path = write_edges(tmp_path, "a b\nb c\nc a\nc d\n")
    bad = write_edges(tmp_path, "1 2 1\n3 4 -1\n", name="bad.txt")
    with make_cluster(1, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        summary = pipelines.run(
            pipelines.pagerank_job(path, out=tmp_path / "o.parquet", workdir=tmp_path / "wd"),
            client,
            progress=False,
        )
        g = graphs.read_edgelist(path)
        np.testing.assert_allclose(
            as_vector(g, ranks_by_label(tmp_path / "o.parquet")), operators.pagerank(g)
        )
        assert summary["device"] == "cpu"
        job = pipelines.pagerank_job(
            bad,
            weighted=None,
            read_options={"weighted": True},
            out=tmp_path / "x.parquet",
            workdir=tmp_path / "wd",
        )
        with pytest.raises(graphs.GraphFormatError) as info:  # raised on the worker, intact here
            pipelines.run(job, client, progress=False)
        assert info.value.line == 2 and info.value.path.endswith("bad.txt")


def test_progress_in_a_jupyter_kernel_without_ipywidgets(tmp_path, monkeypatch, capsys):
    """distributed.progress would show a widget there and fail on the missing import: the stage line."""
    import sys

    import distributed.diagnostics.progressbar as bars
    from distributed import Client

    from cluster import make_cluster

    monkeypatch.setattr(bars, "is_kernel", lambda: True)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets raises ImportError
    path = write_edges(tmp_path, "a b\nb c\nc a\n")
    with make_cluster(1, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.pagerank_job(path, out=tmp_path / "o.parquet", workdir=tmp_path / "wd")
        summary = pipelines.run(job, client, progress=True)
    last = capsys.readouterr().err.splitlines()[-1]  # progress goes to standard error
    assert summary["n"] == 3 and "graphjobs-load 1/1" in last and "pagerank" in last


def test_progress_by_stage_on_the_local_scheduler(tmp_path, sync, capsys):
    from pipelines._progress import stage_line

    assert stage_line({"b": 1}, {"a": 2, "b": 1, "c": 3}, 1.5, order=["b"]) == "[1.50 s] b 1/1  a 0/2  c 0/3"
    assert stage_line({"getitem": 1}, {"a": 1, "getitem": 1}, 0.1) == "[100.00 ms] a 0/1"  # Dask's own
    path = write_edges(tmp_path, "a b\nb c\nc a\n")
    job = pipelines.ppr_job(
        path, pipelines.RandomSources(3), topk=2, out=tmp_path / "o", workdir=tmp_path / "wd", chunk=1
    )
    pipelines.run(job, progress=True)
    out = capsys.readouterr().err  # progress on standard error; not a terminal: whole lines, no redraws
    assert "\r" not in out and out.endswith("\n")
    last = out.splitlines()[-1]
    counts = dict(part.rsplit(" ", 1) for part in last.split("] ", 1)[1].strip().split("  "))
    assert counts["graphjobs-load"] == "1/1" and counts["ppr"] == "3/3"
    assert all(done == total for done, total in (c.split("/") for c in counts.values()))


@pytest.mark.parametrize("tty", [True, False])
def test_progress_redraws_on_a_terminal_and_writes_few_lines_to_a_log(monkeypatch, tty):
    """A terminal gets one line redrawn in place; a log file gets a whole line every LOG_INTERVAL
    seconds and the last one, not a redraw every 0.1 s."""
    from pipelines import _progress

    clock = iter(range(0, 10_000))  # one second a draw
    monkeypatch.setattr(_progress.time, "perf_counter", lambda: float(next(clock)))
    stream = TextStream(tty)
    line = _progress._Line(stream)
    for i in range(1, 26):
        line.draw({"ppr": i}, {"ppr": 25}, final=i == 25)
    out = stream.getvalue()
    if tty:  # every draw redrawn (a second apart, above the 0.1 s interval), then a newline
        assert out.count("\r") == 25 and out.count("\n") == 1 and out.endswith("ppr 25/25\n")
    else:  # at 10 s and 20 s, then the last
        assert "\r" not in out
        assert [t.split("] ")[1] for t in out.splitlines()] == ["ppr 10/25", "ppr 20/25", "ppr 25/25"]


def test_damaged_cached_stages_are_computed_again_with_a_warning(tmp_path, sync, capsys):
    path = dataset_path("ca-GrQc.txt.gz")
    if path is None:
        pytest.skip("datasets folder absent")
    run = lambda wd, out, **kw: pipelines.run(  # noqa: E731
        pipelines.pagerank_job(path, out=tmp_path / out, workdir=tmp_path / wd, **kw), progress=False
    )
    run("clean", "reference.parquet", alpha=0.7)
    reference = pd.read_parquet(tmp_path / "reference.parquet")
    run("wd", "first.parquet", alpha=0.85)
    capsys.readouterr()
    # one edge of the cached graph changed: the next PageRank (another alpha) must not run on it
    (graph,) = (tmp_path / "wd").glob("graph-*")
    indices = np.load(graph / "indices.npy")
    indices[100] = (indices[100] + 1) % indices.max()
    np.save(graph / "indices.npy", indices)
    run("wd", "second.parquet", alpha=0.7)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"graphjobs: warning: {graph}/indices.npy: checksum mismatch: the file changed or is damaged; "
        "reading the graph again"
    ]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "second.parquet"), reference)
    graphs.load(graph)  # rewritten whole
    # a flipped byte of the cached PageRank vector: computed again, not reused
    ranks = max((tmp_path / "wd").glob("pagerank-*.npy"), key=lambda p: p.stat().st_mtime_ns)  # alpha 0.7
    data = bytearray(ranks.read_bytes())
    data[-5] ^= 0x40
    ranks.write_bytes(bytes(data))
    summary = run("wd", "third.parquet", alpha=0.7)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"graphjobs: warning: {ranks}: checksum mismatch: the cached result changed or is damaged; "
        "computing it again"
    ]
    assert summary["cached"]["pagerank"] is False
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "third.parquet"), reference)
    assert run("wd", "fourth.parquet", alpha=0.7)["cached"]["pagerank"] is True  # intact again
