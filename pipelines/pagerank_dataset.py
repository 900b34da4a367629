"""PageRank of a dataset (a folder of edge files): partitioned on the workers, then multi-worker PageRank.

``pagerank_job`` hands a dataset source here: ``ingest.partition_files`` builds the parts without the
whole graph on one host, and ``pipelines.distributed.pagerank(PG, client)`` runs over them (NCCL between GPU
workers). The output lists every vertex: the files' integer ids 0..n-1, or their labels when the files
hold labels (numbered in sorted order by the ingestion).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

from cluster.worker import worker_device
from graphs.errors import OptionError
from pipelines.distributed.pagerank import pagerank as distributed_pagerank

from ._output import check_result_file, check_result_token, reusable_npy, save_npy
from .ingest import partition_files
from .job import Job
from .stages import cluster_workers, write_parquet
from .summary import PageRankSummary


def dataset_job(
    files,
    *,
    alpha,
    personalization,
    max_iter,
    tol,
    weighted,
    directed,
    read_options,
    out,
    workdir,
    top,
    partitions,
    method="auto",
    overwrite=False,
) -> Job:
    if partitions == "auto" or personalization is not None:
        first = files[0] if files else "none"
        raise OptionError(
            f"a dataset of {len(files)} edge file(s) (the first: {first}) is read as one graph split over "
            "the workers: it needs partitions=N (--partitions N, a part per worker) and no personalization"
        )
    opts = dict(read_options or {})
    weighted_read = bool(opts.pop("weighted", False)) or opts.get("weight_col") is not None
    dedupe = bool(opts.pop("dedupe", False))
    opts.pop("directed", None)
    ingest = partition_files(
        files,
        partitions,
        Path(workdir) / f"parts-{tokenize(files, partitions, opts)}",
        directed=directed,
        weighted=weighted_read,
        dedupe=dedupe,
        read_options=opts,
        workdir=workdir,
    )
    params = dict(alpha=alpha, max_iter=max_iter, tol=tol, weighted=weighted)
    if method != "auto":  # 'auto' leaves the token of earlier runs' artifacts as it was
        params["method"] = method
    ptoken = tokenize("pagerank-dataset", ingest.result.key, params)
    artifact = str(Path(workdir).resolve() / f"pagerank-{ptoken}.npy")
    call = dask.delayed(_pagerank_parts, pure=True)
    ranks = call(ingest.result, params, artifact, dask_key_name=f"graphjobs-pagerank-{ptoken}")
    out = str(Path(out).resolve())
    check = functools.partial(check_result_token, out, "pagerank", ptoken, overwrite)
    check()
    result = dask.delayed(_write_parts, pure=True)(
        ingest.result,
        ranks,
        out,
        ptoken,
        top,
        dask_key_name=f"graphjobs-write-pagerank-{tokenize(ptoken, out)}",
    )
    return Job(
        "pagerank",
        result,
        Path(workdir),
        stages={"ingest": ingest.result, "pagerank": ranks, "write": result},
        out=Path(out),
        check_out=check,
    )


def _pagerank_parts(ingested: dict, params: dict, artifact: str) -> dict:
    if reusable_npy(artifact):
        return {"path": artifact, "seconds": 0.0, "device": None, "cached": True}
    if cluster_workers() == 0:
        raise OptionError("a partitioned dataset needs a Dask cluster (run with --cluster or --scheduler)")
    from distributed import worker_client

    import graphs

    pg = graphs.load_partitioned(ingested["out"], verify=False)
    t0 = time.perf_counter()
    with worker_client() as client:
        info: dict = {}
        x = distributed_pagerank(pg, client, info=info, **params).astype(np.float64)
    seconds = time.perf_counter() - t0
    save_npy(artifact, x)
    return {"path": artifact, "seconds": seconds, "device": info.get("device"), "cached": False}


def _write_parts(ingested: dict, ranks: dict, out: str, token: str, top: int) -> PageRankSummary:
    import pyarrow as pa

    import graphs

    x = np.load(ranks["path"])
    ids = graphs.load_partitioned(ingested["out"], verify=False).ids
    vertex = np.arange(x.size, dtype=np.int64) if ids is None else ids
    table = pa.table({"vertex": vertex, "pagerank": x})
    check_result_file(out, "pagerank")
    write_parquet(table.replace_schema_metadata({"graphjobs.job": "pagerank", "graphjobs.token": token}), out)
    best = np.argsort(-x, kind="stable")[:top]
    device = ranks["device"] or worker_device()
    return PageRankSummary(
        out=out,
        n=ingested["n"],
        m=ingested["m"],
        top=[(vertex[i].item() if hasattr(vertex[i], "item") else vertex[i], float(x[i])) for i in best],
        pagerank_seconds=ranks["seconds"],
        device=device,
        cached={"pagerank": ranks["cached"], "output": False},
        memory=_memory(ingested, device),
    )


def _memory(ingested: dict, device: str) -> dict:
    """The estimated working set of one part's PageRank on a worker (``pagerank_bytes``), beside the free
    memory of this task's device."""
    from graphs._device import free_memory
    from operators.pagerank.parts import pagerank_bytes

    parts = len(ingested["edges"])
    n, m, weighted = ingested["n"], ingested["m"], bool(ingested.get("weighted"))
    need = pagerank_bytes(n, m, weighted=weighted, parts=parts, device=device)
    return {"partitions": parts, "estimate_bytes": need, "free_bytes": free_memory(device), "device": device}
