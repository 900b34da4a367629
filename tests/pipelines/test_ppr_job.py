"""The single-source PPR job: top entries per source in Parquet, against the operator and exact PPR."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import graphs
import pipelines
from operators import ppr
from pipelines.cli import main


def _check(g, df, k, tol=1e-7):
    assert list(df.columns) == ["source", "rank", "vertex", "ppr"]
    for src, rows in df.groupby("source"):
        rows = rows.sort_values("rank")
        listed = len(rows)  # k, or fewer: only vertices of positive PPR are written
        assert rows["rank"].tolist() == list(range(1, listed + 1)) and 1 <= listed <= k
        assert (rows.ppr > 0).all()
        exact = ppr(g, [src], method="power", tol=1e-12)[0]
        got = exact[g.internal_ids(rows.vertex.to_numpy())]
        # push underestimates each entry, by at most the row's L1 error (<= tol)
        assert (np.abs(got - rows.ppr.to_numpy()) <= tol).all()
        assert rows.ppr.iloc[-1] >= (np.sort(exact)[-k] if listed == k else 0) - tol
        if listed < k:  # every vertex left out has (at most the residue of) PPR 0
            assert np.delete(exact, g.internal_ids(rows.vertex.to_numpy())).max() <= tol


def test_job_from_a_labelled_file(tmp_path, sync):
    g0 = graphs.barabasi_albert(500, 3, seed=2)
    src, dst, _ = g0.edges()
    path = tmp_path / "edges.csv"
    pd.DataFrame({"a": [f"v{x}" for x in src], "b": [f"v{x}" for x in dst]}).to_csv(path, index=False)
    sources = ["v1", "v20", "v300", "v7", "v499"]
    job = pipelines.ppr_job(path, sources, topk=10, tol=1e-8, out=tmp_path / "out", workdir=tmp_path, chunk=2)
    assert any(key.startswith("ppr-") for key in job.keys())
    summary = pipelines.run(job, progress=False)
    assert summary["queries"] == 5 and summary["parts"] == 3 and summary["iterations_mean"] > 1
    assert 0 < summary["l1_bound_max"] <= 1e-8
    df = pd.read_parquet(tmp_path / "out")
    assert sorted(set(df.source)) == sorted(sources)
    _check(graphs.read_edgelist(path), df, 10, tol=1e-8)


def test_default_tol_gives_the_exact_top_entries(tmp_path, sync):
    """At the default tol the job's top 100 of each source are the exact top 100 (precision >= 0.99,
    against a direct solve) on a SNAP graph, and the summary certifies the L1 error."""
    from tests.conftest import snap
    from tests.operators.ppr.test_accuracy import _exact

    g = snap("wiki-Vote", dedupe=True)
    labels = g.ids[np.flatnonzero(np.diff(g.indptr) > 0)[::700]]
    job = pipelines.ppr_job(g, labels.tolist(), out=tmp_path / "out", workdir=tmp_path, chunk=4)
    summary = pipelines.run(job, progress=False)
    assert summary["l1_bound_max"] <= 1e-6
    df = pd.read_parquet(tmp_path / "out")
    hits = wanted = 0
    for s in labels:  # a listed vertex is right when its exact value reaches the k-th (ties count)
        exact = _exact(g, int(g.internal_ids([s])[0]))
        k = min(100, int((exact > 1e-15).sum()))
        kth = np.sort(exact)[-k]
        got = g.internal_ids(df[df.source == s].vertex.to_numpy())
        assert len(got) == k
        hits += int((exact[got] >= kth - 1e-12).sum())
        wanted += k
    assert hits >= 0.99 * wanted


def test_unknown_source_fails_before_queries(tmp_path, sync):
    job = pipelines.ppr_job("rmat:scale=9,seed=1", [1, 10**7], out=tmp_path / "o", workdir=tmp_path)
    with pytest.raises(KeyError, match="10000000"):
        pipelines.run(job, progress=False)
    assert not (tmp_path / "o").exists()


def test_cli(tmp_path, capsys):
    out = tmp_path / "res"
    args = [
        "ppr",
        "rmat:scale=10,seed=2",
        "--random",
        "4",
        "-k",
        "8",
        "--method",
        "pull",
        "--out",
        str(out),
    ]
    assert main([*args, "--workdir", str(tmp_path), "--quiet", "--device", "cpu"]) == 0
    assert re.search(r"the first source's steps: \d+ pulls\)", capsys.readouterr().out)
    _check(graphs.rmat(10, seed=2, device="cpu"), pd.read_parquet(out), 8, tol=1e-6)
    assert (
        main(
            [
                "ppr",
                "rmat:scale=8",
                "--random",
                "3",
                "--tol",
                "-1",
                "--quiet",
                "--device",
                "cpu",
                "--workdir",
                str(tmp_path),
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 1
    )
    assert "tol must be a positive number" in capsys.readouterr().err


def test_on_a_real_local_cluster(tmp_path):
    from distributed import Client

    from cluster import make_cluster

    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.ppr_job(
            "rmat:scale=10,seed=4",
            pipelines.RandomSources(30),
            topk=5,
            out=tmp_path / "o",
            workdir=tmp_path,
            chunk=4,
        )
        summary = pipelines.run(job, client, progress=False)
        assert summary["queries"] == 30 and summary["parts"] == 8
    df = pd.read_parquet(tmp_path / "o")
    rows = df.groupby("source").size()  # R-MAT sources that reach fewer than 5 vertices list fewer rows
    assert df.source.nunique() == 30 and (df.ppr > 0).all() and rows.max() == 5 and len(df) == rows.sum()
    assert summary.sources_short == int((rows < 5).sum()) > 0


def test_block_is_checked_when_the_job_is_built(tmp_path):
    g = graphs.barabasi_albert(50, 2, seed=1)
    with pytest.raises(ValueError, match="block"):
        pipelines.ppr_job(g, pipelines.RandomSources(4), block=0, out=tmp_path / "bad", workdir=tmp_path)


@pytest.mark.gpu
def test_job_batches_sources_on_the_gpu(tmp_path, sync):
    g = graphs.barabasi_albert(2000, 4, seed=3)
    for block in (None, 8):  # one task of 40 sources: one batch of 40, or 5 of 8
        out = tmp_path / f"out-{block}"
        job = pipelines.ppr_job(
            g,
            pipelines.RandomSources(40),
            topk=20,
            tol=1e-8,
            chunk=40,
            block=block,
            out=out,
            workdir=tmp_path,
        )
        summary = pipelines.run(job, progress=False)
        assert summary["queries"] == 40 and summary["parts"] == 1 and summary["device"] == "gpu"
        _check(g, pd.read_parquet(out), 20, tol=1e-8)


def test_a_jobs_device_memory_estimate_is_its_largest_chunks_plus_the_chunks_running_beside_it():
    from types import SimpleNamespace

    from pipelines.summary import PPRSummary

    part = dict(queries=2, seconds=0.5, device="gpu", first=None, short=0, iterations=[], models=None)
    record = {"estimate_bytes": 2**30, "free_bytes": 100 * 2**30, "device": "gpu", "parts": {}}
    record.update(per_chunk_bytes=2**29, worker="h:1", thread=1)
    large = {**record, "estimate_bytes": 3 * 2**30}
    graph = SimpleNamespace(n=10, m=20)
    fields = dict(topk=5, method="power", alpha=0.8, tol=1e-6, seed=0)

    def summary(*parts):
        return PPRSummary.from_parts(graph, list(parts), "out", "gpu", **fields)

    # one thread ran the chunks (and a resumed part of an old run states none): the largest estimate
    s = summary({**part, "memory": record}, {**part, "memory": large}, part)
    assert s.memory["estimate_bytes"] == 3 * 2**30 and s.memory["concurrent_chunks"] == 1
    assert "memory: estimated 3.00 GiB per gpu worker, 100.00 GiB free" in s.lines(seconds=1.0)
    # three threads of one worker ran chunks at once: two more chunks' own share; another worker's
    # threads hold their device's memory, not this one's
    at_once = [{**part, "memory": {**record, "thread": t}} for t in (1, 2, 3)]
    elsewhere = {**part, "memory": {**record, "worker": "h:2", "thread": 9}}
    s = summary(*at_once, elsewhere)
    assert s.memory["estimate_bytes"] == 2**30 + 2 * 2**29 and s.memory["concurrent_chunks"] == 3
    assert summary(part).memory is None


def test_a_chunks_memory_record_is_checked_and_names_its_worker_and_thread(monkeypatch):
    import os
    import threading

    import operators._gpu.memory as memory
    from operators._gpu.memory import MemoryEstimate
    from operators.errors import InsufficientMemoryError
    from pipelines.stages import chunk_memory, job_hint

    monkeypatch.setattr(memory, "free_memory", lambda device: 10_000)
    est = MemoryEstimate("a chunk", "gpu", (("graph", 3000), ("iterates", 2000)))
    record = chunk_memory(est.check("fewer sources"), 2000)
    assert record["estimate_bytes"] == 5000 and record["per_chunk_bytes"] == 2000
    assert record["worker"].endswith(f":{os.getpid()}") and record["thread"] == threading.get_ident()
    monkeypatch.setattr(memory, "free_memory", lambda device: 5000)
    # an operator's refusal names its own options; inside a job, the job's flags instead
    with pytest.raises(InsufficientMemoryError, match=r"a chunk on the GPU needs about 4.9 KiB.*; --fewer$"):
        with job_hint("--fewer"):
            est.check("fewer sources")


def test_a_summary_names_the_solver_steps_in_words():
    from pipelines.summary import steps

    assert steps("QSSSS") == "1 queue pass, 4 sweeps"
    assert steps("PPPLLP") == "3 pushes, 2 pulls, 1 push"
    assert steps("") == steps(None) == "none recorded"


def test_a_cpu_chunks_memory_is_stated_and_checked_against_the_hosts(tmp_path, capsys, monkeypatch):
    """On the CPU a chunk's estimate is the graph (held), the workspaces of the sources solved at once
    (49 bytes a vertex each) and its top rows, and the transpose for the methods that pull; past the
    host's free memory the job refuses in one line, exit 1, nothing written."""
    import json

    import operators._gpu.memory as memory
    from operators import PPROptions
    from operators._cpu_threads import cpu_threads
    from operators._gpu.memory import graph_bytes
    from pipelines.ppr import _host_estimate

    g = graphs.rmat(8, seed=0)
    opts = ["--random", "4", "-k", "10", "--device", "cpu", "--quiet", "--workdir", str(tmp_path / "wd")]
    assert main(["ppr", "rmat:8", *opts, "--out", str(tmp_path / "fits"), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)["memory"]
    assert record["device"] == "cpu"
    solves = cpu_threads(g.n, 49, 4)  # sources solved at once, as operators.ppr picks them
    assert record["estimate_bytes"] == graph_bytes(g.n, g.m) + 49 * g.n * solves + 16 * 4 * 10
    pull = _host_estimate(g, PPROptions(method="pull", topk=10), 4)
    assert dict(pull.parts)["transpose"] == graph_bytes(g.n, g.m)
    power = dict(_host_estimate(g, PPROptions(method="power", topk=10), 4).parts)  # a block of the 4
    assert (
        power["iterates"] == 3 * 8 * g.n * 4
        and power["weighted transpose"] == graph_bytes(g.n, g.m) + 8 * g.m + g.n
    )
    monkeypatch.setattr(memory, "free_memory", lambda device: 49 * g.n)  # not even one workspace and rows
    assert main(["ppr", "rmat:8", *opts, "--out", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "PPR of 4 source(s), n=256" in err[0] and "on the host" in err[0], err
    assert "a smaller --chunk" in err[0] and not (tmp_path / "p").exists()
