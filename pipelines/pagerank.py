"""The PageRank job: load -> CSR build -> PageRank -> Parquet (`vertex`, `pagerank`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

import operators
from cluster.worker import worker_device
from graphs._device import to_host

from .job import Job
from .stages import default_workdir, load_stage, write_parquet


def pagerank_job(
    source,
    *,
    alpha: float = 0.85,
    personalization=None,
    max_iter: int = 100,
    tol: float = 1e-6,
    weighted: bool | None = None,
    method: str = "auto",
    directed: bool = True,
    read_options: dict | None = None,
    reorder: str | None = None,
    out="pagerank.parquet",
    workdir=None,
    top: int = 10,
) -> Job:
    """Build the PageRank job's Dask graph (nothing runs until ``pipelines.run``).

    Parameters
    ----------
    source : path, generator spec or CSRGraph
        An edge-list file (any format ``graphs.read_edgelist`` reads), a spec such as
        ``'rmat:scale=20,seed=0'``, or a graph in memory.
    alpha, personalization, max_iter, tol, weighted, method
        As in ``operators.pagerank`` (personalization keyed by original vertex labels).
    directed : bool
        Read the file as directed (default) or undirected.
    read_options : dict, optional
        More ``read_edgelist`` options (``dedupe``, ``self_loops``, ``src_col``, ...).
    reorder : {'degree', 'in_degree', 'out_degree'}, optional
        Renumber vertices once at load (labels are kept): faster GPU iterations on skewed graphs,
        paid back when the cached graph serves several jobs.
    out : path
        Parquet file written with columns ``vertex`` (original labels) and ``pagerank``.
    workdir : path, optional
        Where stage artifacts are kept, keyed by token (default ``$GRAPHJOBS_WORKDIR`` or
        ``.graphjobs``); a re-run skips the stages found there.
    top : int
        Vertices listed in the summary.

    Returns
    -------
    Job
        Its result is a summary dict: ``out``, ``n``, ``m``, ``top`` [(vertex, pagerank)], timings.
    """
    workdir = Path(workdir or default_workdir())
    read_options = {"directed": directed, **(read_options or {})}
    load, gtoken = load_stage(source, workdir=workdir, read_options=read_options, reorder=reorder)
    params = dict(
        alpha=alpha,
        personalization=personalization,
        max_iter=max_iter,
        tol=tol,
        weighted=weighted,
        method=method,
    )
    ptoken = tokenize("pagerank", gtoken, params)
    artifact = str(workdir.resolve() / f"pagerank-{ptoken}.npy")
    ranks = dask.delayed(_pagerank, pure=True)(
        load, params, artifact, dask_key_name=f"graphjobs-pagerank-{ptoken}"
    )
    out = str(Path(out).resolve())
    wkey = f"graphjobs-write-pagerank-{tokenize(ptoken, out)}"
    result = dask.delayed(_write, pure=True)(load, ranks, out, ptoken, top, dask_key_name=wkey)
    return Job("pagerank", result, workdir, stages={"load": load, "pagerank": ranks, "write": result})


def _pagerank(graph, params, artifact) -> dict:
    if os.path.exists(artifact):
        return {"path": artifact, "seconds": 0.0, "device": None, "cached": True}
    g = graph.get()
    t0 = time.perf_counter()
    x = to_host(operators.pagerank(g, **params)).astype(np.float64)
    seconds = time.perf_counter() - t0
    tmp = f"{artifact}.{os.getpid()}.partial.npy"
    np.save(tmp, x)
    os.replace(tmp, artifact)
    return {"path": artifact, "seconds": seconds, "device": g.device, "cached": False}


def _write(graph, ranks, out, token, top) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    x = np.load(ranks["path"])
    ids = graph.get("cpu").ids
    written = False
    if not (os.path.exists(out) and pq.read_schema(out).metadata.get(b"graphjobs.token") == token.encode()):
        table = pa.table({"vertex": pa.array(ids.tolist() if ids.dtype == object else ids), "pagerank": x})
        table = table.replace_schema_metadata({"graphjobs.job": "pagerank", "graphjobs.token": token})
        write_parquet(table, out)
        written = True
    best = np.argsort(-x, kind="stable")[:top]
    return {
        "job": "pagerank",
        "out": out,
        "n": graph.n,
        "m": graph.m,
        "top": [(ids[i].item() if hasattr(ids[i], "item") else ids[i], float(x[i])) for i in best],
        "pagerank_seconds": ranks["seconds"],
        "device": ranks["device"] or worker_device(),
        "cached": {"pagerank": ranks["cached"], "output": not written},
    }
