"""Batch jobs at scale: resume, output folders of other jobs, workdir locks, a worker killed mid-job."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import dask
import pandas as pd
import pytest

import pipelines
from pipelines.cli import main
from pipelines.job import LOCK, workdir_lock

GRAPH = "rmat:scale=10,seed=7"


def _every_source_once(out, count, k):
    df = pd.read_parquet(out)
    ranks = df.groupby("source")["rank"]
    # no source lost, none duplicated: ranks 1..rows once each (fewer than k rows for a source that
    # reaches fewer vertices: only positive PPR is written)
    assert ranks.ngroups == count and (ranks.size() <= k).all() and (df.ppr > 0).all()
    assert (ranks.nunique() == ranks.size()).all() and (ranks.max() == ranks.size()).all()
    return df


def test_resume_skips_finished_chunks(tmp_path, sync):
    job = pipelines.ppr_job(
        GRAPH, pipelines.RandomSources(10), topk=4, chunk=2, out=tmp_path / "o", workdir=tmp_path
    )
    dask.compute(*job.stages["queries"][:2])  # an interrupted run: two of five chunks finished
    parts = sorted((tmp_path / "o").glob("part-*.parquet"))
    assert len(parts) == 2
    stamps = [p.stat().st_mtime_ns for p in parts]
    summary = pipelines.run(job, progress=False)
    assert summary["parts"] == 5 and summary["resumed_parts"] == 2
    assert [p.stat().st_mtime_ns for p in parts] == stamps  # not rewritten
    first = _every_source_once(tmp_path / "o", 10, 4)
    again = pipelines.run(
        pipelines.ppr_job(
            GRAPH, pipelines.RandomSources(10), topk=4, chunk=2, out=tmp_path / "o", workdir=tmp_path
        ),
        progress=False,
    )
    assert again["resumed_parts"] == 5
    pd.testing.assert_frame_equal(first, _every_source_once(tmp_path / "o", 10, 4))
    manifest = json.loads((tmp_path / "o" / "_manifest.json").read_text())
    assert manifest["job"] == "ppr" and len(manifest["parts"]) == 5


def test_chunk_killed_while_writing_is_recomputed(tmp_path, sync):
    job = pipelines.ppr_job(
        GRAPH, pipelines.RandomSources(6), topk=3, chunk=2, out=tmp_path / "o", workdir=tmp_path
    )
    pipelines.run(job, progress=False)
    out = tmp_path / "o"
    (out / "_chunks" / "part-00001.json").unlink()  # died after writing its part, before its record
    (out / "part-00001.parquet").write_bytes(b"half a file")
    (out / ".part-00002.parquet.4242.partial").write_bytes(b"a temporary of a killed writer")
    summary = pipelines.run(job, progress=False)
    assert summary["resumed_parts"] == 2
    assert not list(out.glob(".*.partial"))
    _every_source_once(out, 6, 3)


def test_output_of_another_job_is_refused_or_replaced(tmp_path, sync, capsys):
    out = tmp_path / "o"
    pipelines.run(
        pipelines.ppr_job(GRAPH, pipelines.RandomSources(12), topk=3, chunk=2, out=out, workdir=tmp_path),
        progress=False,
    )
    with pytest.raises(FileExistsError, match="another ppr job"):
        pipelines.ppr_job(
            GRAPH, pipelines.RandomSources(4), topk=3, chunk=2, out=out, workdir=tmp_path, seed=1
        )
    job = pipelines.ppr_job(
        GRAPH, pipelines.RandomSources(4), topk=3, chunk=2, out=out, workdir=tmp_path, seed=1, overwrite=True
    )
    summary = pipelines.run(job, progress=False)
    assert summary["resumed_parts"] == 0
    assert len(list(out.glob("part-*.parquet"))) == 2  # the earlier job's four extra parts are gone
    _every_source_once(out, 4, 3)
    args = [
        "ppr",
        GRAPH,
        "--random",
        "5",
        "-k",
        "3",
        "--out",
        str(out),
        "--workdir",
        str(tmp_path),
        "--quiet",
        "--device",
        "cpu",
    ]
    assert main(args) == 1 and "--overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
    _every_source_once(out, 5, 3)


def test_a_second_job_on_a_workdir_is_refused(tmp_path, sync):
    job = pipelines.ppr_job(GRAPH, pipelines.RandomSources(2), topk=3, out=tmp_path / "o", workdir=tmp_path)
    with workdir_lock(tmp_path, "simrank"), pytest.raises(pipelines.WorkdirLockedError, match="simrank job"):
        pipelines.run(job, progress=False)
    assert not (tmp_path / LOCK).exists()
    code = "import os; print(os.getpid())"
    gone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    stale = {"pid": int(gone.stdout), "host": socket.gethostname(), "job": "ppr", "since": "earlier"}
    (tmp_path / LOCK).write_text(json.dumps(stale))  # left by a process that died
    assert pipelines.run(job, progress=False)["queries"] == 2
    assert not (tmp_path / LOCK).exists()


def test_worker_killed_mid_job(tmp_path):
    from distributed import Client

    from cluster import make_cluster

    out, count, k = tmp_path / "o", 160, 5
    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        pids = client.run(os.getpid)
        job = pipelines.ppr_job(
            "rmat:scale=12,seed=3", pipelines.RandomSources(count), topk=k, chunk=2, out=out, workdir=tmp_path
        )
        killed = {}

        def kill_one_when_work_started():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(list(out.glob("part-*.parquet"))) < 3:
                time.sleep(0.005)
            killed["parts_before"] = len(list(out.glob("part-*.parquet")))
            os.kill(next(iter(pids.values())), signal.SIGKILL)

        killer = threading.Thread(target=kill_one_when_work_started)
        killer.start()
        summary = pipelines.run(job, client, progress=False)
        killer.join()
    assert killed["parts_before"] < count // 2  # the worker died while most chunks were still to do
    assert summary["queries"] == count and summary["parts"] == count // 2
    _every_source_once(out, count, k)
    assert not list(out.glob(".*.partial"))


def test_pagerank_job_splits_the_graph_when_a_worker_is_too_small(tmp_path, monkeypatch):
    from distributed import Client

    import graphs
    import operators
    from cluster import make_cluster

    g = graphs.rmat(11, seed=2, device="cpu")
    spec = g  # a graph in memory: generating rmat:11 (its peak) would not fit in the limits set below
    exact = dict(zip(g.ids.tolist(), operators.pagerank(g, tol=1e-9).tolist(), strict=True))
    # whole graph ~0.39 MB, half ~0.2 MB: with 0.3 MB free per worker only two parts fit
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", "300000")
    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.pagerank_job(spec, tol=1e-9, out=tmp_path / "pr.parquet", workdir=tmp_path)
        summary = pipelines.run(job, client, progress=False)
        assert summary["memory"]["partitions"] == 2
        assert summary["memory"]["estimate_bytes"] <= 0.9 * summary["memory"]["free_bytes"]
        df = pd.read_parquet(tmp_path / "pr.parquet")
        got = dict(zip(df.vertex.tolist(), df.pagerank.tolist(), strict=True))
        assert max(abs(got[v] - exact[v]) for v in exact) < 1e-6
        monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", "1000")
    with make_cluster(2, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        job = pipelines.pagerank_job(spec, tol=1e-8, out=tmp_path / "x.parquet", workdir=tmp_path)
        with pytest.raises(MemoryError, match=r"PageRank of n=2,048.*2 workers in the cluster"):
            pipelines.run(job, client, progress=False)
    assert not (tmp_path / "x.parquet").exists()


def test_pagerank_job_too_big_without_a_cluster(tmp_path, sync, monkeypatch):
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", "1K")
    import graphs

    g = graphs.rmat(9, seed=0)  # in memory: generating it would be refused first, under 1K
    job = pipelines.pagerank_job(g, out=tmp_path / "p.parquet", workdir=tmp_path)
    with pytest.raises(MemoryError, match="partitions need a distributed cluster"):
        pipelines.run(job, progress=False)
    with pytest.raises(ValueError, match="partitions must be"):
        pipelines.pagerank_job("rmat:scale=9,seed=0", partitions=0)
