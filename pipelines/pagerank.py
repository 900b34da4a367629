"""The PageRank job: load -> CSR build -> PageRank -> Parquet (`vertex`, `pagerank`)."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

import operators
from cluster.worker import worker_device
from graphs._device import free_memory, to_host
from graphs.errors import OptionError
from graphs.stream import PARQUET_SUFFIXES
from operators.errors import InsufficientMemoryError
from operators.options import PageRankOptions
from operators.pagerank.parts import pagerank_bytes
from pipelines.distributed.pagerank import pagerank as distributed_pagerank

from ._output import check_result_file, check_result_token, reusable_npy, save_npy, warn
from .ingest import dataset_files
from .job import Job
from .stages import cluster_workers, default_workdir, load_stage, write_parquet
from .summary import PageRankSummary


def pagerank_job(
    source,
    *,
    alpha: float = PageRankOptions.alpha,
    personalization=None,
    max_iter: int = PageRankOptions.max_iter,
    tol: float = PageRankOptions.tol,
    weighted: bool | None = None,
    method: str = PageRankOptions.method,
    directed: bool = True,
    read_options: dict | None = None,
    reorder: str | None = None,
    out="pagerank.parquet",
    workdir=None,
    top: int = 10,
    partitions="auto",
    overwrite: bool = False,
) -> Job:
    """Build the PageRank job's Dask graph (nothing runs until ``pipelines.run``).

    Parameters
    ----------
    source : path, generator spec, CSRGraph, or a dataset
        An edge-list file (any format ``graphs.read_edgelist`` reads), a spec such as
        ``'rmat:scale=20,seed=0'``, or a graph in memory. A folder of edge files or a list of paths is
        a dataset: with ``partitions=N`` it is partitioned on the workers
        (``pipelines.ingest.partition_files``) without the whole graph on one host; integer ids >= 0
        are vertex numbers, other labels are numbered in sorted order and listed in the output. A
        folder of Parquet files with integer ids and ``partitions='auto'`` is read into one graph,
        batch by batch (``graphs.stream.read_parquet_dataset``: vertex i is id i).
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
    partitions : 'auto' or int
        'auto': split the graph over the cluster's workers (``graphs.partition``, NCCL between GPU
        workers) when its estimated working set exceeds the free memory of a worker's device, with the
        fewest parts that fit; an int forces that many parts (1: never split). A graph that fits on no
        number of workers raises ``InsufficientMemoryError`` before anything is allocated on a device.
        The estimate is in the summary (``memory``). ``$GRAPHJOBS_MEMORY_LIMIT`` caps the free memory.
    overwrite : bool
        Replace the result of another PageRank job (other options or input) in ``out``; otherwise it is
        refused. A re-run of the same job keeps it.

    Returns
    -------
    Job
        Its result is a ``PageRankSummary``: ``out``, ``n``, ``m``, ``top`` [(vertex, pagerank)], timings.
    """
    workdir = Path(workdir or default_workdir())
    options = PageRankOptions(alpha=alpha, max_iter=max_iter, tol=tol, method=method)  # before anything runs
    check_result_file(out, "pagerank")  # before anything runs: never over an input
    files = dataset_files(source)
    parquet_folder = (
        files is not None
        and not isinstance(source, list | tuple)
        and all(f.lower().endswith(PARQUET_SUFFIXES) for f in files)
    )
    if files is not None and not (parquet_folder and partitions == "auto"):  # else read streamed
        from .pagerank_dataset import dataset_job

        if method not in ("auto", "pull", "binned") or reorder is not None:  # they would go unused
            raise OptionError(
                f"a dataset of edge files is partitioned and computed by pull or binned "
                f"passes: method={method!r} and reorder={reorder!r} do not apply"
            )

        return dataset_job(
            files,
            alpha=alpha,
            personalization=personalization,
            max_iter=max_iter,
            tol=tol,
            weighted=weighted,
            directed=directed,
            read_options=read_options,
            out=out,
            workdir=workdir,
            top=top,
            partitions=partitions,
            method=method,
            overwrite=overwrite,
        )
    read_options = {"directed": directed, **(read_options or {})}
    load, gtoken = load_stage(source, workdir=workdir, read_options=read_options, reorder=reorder)
    params = dict(options=options, personalization=personalization, weighted=weighted)
    ptoken = tokenize("pagerank", gtoken, params)
    artifact = str(workdir.resolve() / f"pagerank-{ptoken}.npy")
    if partitions != "auto" and (
        isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1
    ):
        raise OptionError(f"partitions must be 'auto' or an int >= 1, got {partitions!r}")
    ranks = dask.delayed(_pagerank, pure=True)(
        load,
        params,
        artifact,
        partitions,
        str(workdir.resolve()),
        dask_key_name=f"graphjobs-pagerank-{ptoken}",
    )
    out = str(Path(out).resolve())
    check = functools.partial(check_result_token, out, "pagerank", ptoken, overwrite)
    check()
    wkey = f"graphjobs-write-pagerank-{tokenize(ptoken, out)}"
    result = dask.delayed(_write, pure=True)(load, ranks, out, ptoken, top, dask_key_name=wkey)
    stages = {"load": load, "pagerank": ranks, "write": result}
    return Job("pagerank", result, workdir, stages=stages, out=Path(out), check_out=check)


def _pagerank(graph, params, artifact, partitions, workdir) -> dict:
    if reusable_npy(artifact):
        return {"path": artifact, "seconds": 0.0, "device": None, "cached": True, "memory": None}
    device = worker_device()
    weighted = graph.weighted if params["weighted"] is None else bool(params["weighted"])
    memory = memory_plan(graph.n, graph.m, weighted, device, partitions)
    t0 = time.perf_counter()
    if memory["partitions"] == 1:  # the transpose is not kept with the worker's graph, where it would
        # hold the graph's size again through the stages after this one (an index build)
        with graph.get().scratch() as view:
            x = to_host(operators.pagerank(view, **params)).astype(np.float64)
    else:
        x = _partitioned(graph, params, memory["partitions"], workdir)
    seconds = time.perf_counter() - t0
    save_npy(artifact, x)
    return {"path": artifact, "seconds": seconds, "device": device, "cached": False, "memory": memory}


def memory_plan(n: int, m: int, weighted: bool, device: str, partitions) -> dict:
    """How many parts PageRank needs on this worker's device; InsufficientMemoryError when none fit."""
    free = free_memory(device)
    need = {1: pagerank_bytes(n, m, weighted=weighted, device=device)}
    if partitions == "auto" and need[1] <= 0.9 * free:
        parts = 1
    else:
        workers = cluster_workers()
        choices = [partitions] if partitions != "auto" else range(2, max(workers, 2) + 1)
        for p in choices:
            need[p] = pagerank_bytes(n, m, weighted=weighted, parts=p, device=device)
        fits = [p for p in choices if need[p] <= 0.9 * free and (p == 1 or p <= workers)]
        if not fits:
            p = max(choices)
            raise InsufficientMemoryError(
                f"PageRank of n={n:,}, m={m:,} on {device} ({p} part{'s' if p > 1 else ''}, "
                f"{workers} worker{'s' if workers != 1 else ''} in the cluster)",
                need[p],
                free,
                "run the job on a cluster with more or larger devices (--scheduler, --cluster); "
                "partitions need a distributed cluster with one worker per part",
            )
        parts = fits[0]
    return {"partitions": parts, "estimate_bytes": need[parts], "free_bytes": free, "device": device}


def _partitioned(graph, params, parts: int, workdir: str) -> np.ndarray:
    from distributed import worker_client

    import graphs

    path = Path(workdir) / f"partitions-{graph.token}-{parts}"
    pg = None
    if (path / "meta.json").is_file():  # an earlier run's: checked before it is reused
        try:
            pg = graphs.load_partitioned(path, verify=True)
        except graphs.GraphFormatError as exc:
            warn(f"{exc}; partitioning the graph again")
    if pg is None:
        graphs.partition(graph.get("cpu"), parts).save(path, overwrite=True)
        pg = graphs.load_partitioned(path, verify=False)
    options = params["options"]
    kw = {
        **params,
        "options": options.replace(method=options.method if options.method in ("pull", "binned") else "auto"),
    }
    with worker_client() as client:  # leaves this task's thread free for this worker's own part
        return distributed_pagerank(pg, client, **kw).astype(np.float64)


def _intact(out: str, ids, x) -> bool:
    """Whether the earlier result ``out`` of this very job still holds ``ids`` and ``x`` (read back: a file
    damaged since is reported and written again)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(out)
        vertex, values = (table[c].to_numpy(zero_copy_only=False) for c in ("vertex", "pagerank"))
    except (pa.ArrowException, OSError, KeyError) as exc:
        warn(f"{out}: the earlier result is damaged ({' '.join(str(exc).split())[:120]}); writing it again")
        return False
    if values.shape != x.shape or not np.array_equal(values, x) or not np.array_equal(vertex, ids):
        warn(f"{out}: the earlier result changed since it was written; writing it again")
        return False
    return True


def _write(graph, ranks, out, token, top) -> PageRankSummary:
    import pyarrow as pa

    x = np.load(ranks["path"])
    ids = graph.get("cpu").ids
    written = False
    earlier = check_result_file(out, "pagerank")  # its footer, read once
    same = earlier is not None and earlier.get(b"graphjobs.token") == token.encode()
    if not same or not _intact(out, ids, x):
        table = pa.table({"vertex": pa.array(ids.tolist() if ids.dtype == object else ids), "pagerank": x})
        table = table.replace_schema_metadata({"graphjobs.job": "pagerank", "graphjobs.token": token})
        write_parquet(table, out)
        written = True
    best = np.argsort(-x, kind="stable")[:top]
    return PageRankSummary(
        out=out,
        n=graph.n,
        m=graph.m,
        top=[(ids[i].item() if hasattr(ids[i], "item") else ids[i], float(x[i])) for i in best],
        pagerank_seconds=ranks["seconds"],
        device=ranks["device"] or worker_device(),
        cached={"pagerank": ranks["cached"], "output": not written},
        memory=ranks["memory"],
    )
