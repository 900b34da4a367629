"""The top-k PPR jobs: load -> CSR -> PageRank -> IRW index, then query batches -> Parquet partitions.

``index_job`` builds (or finds) the index in a folder; ``topk_ppr_job`` answers a batch of sources
from a file, a generator spec or such a folder. Sources are checked in one task before any query
runs; then chunks of sources are spread over the workers, each of which loads the graph and the
index once (``pipelines._state``) and writes its own partition ``part-NNNNN.parquet`` with columns
``source``, ``rank``, ``vertex``, ``ppr``.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

import operators
from cluster.worker import worker_device
from graphs._device import to_device, to_host
from operators._checks import check_count
from operators.ppr_index import index_options
from operators.topk_ppr import topk_options

from . import _state
from .job import Job
from .pagerank import _pagerank
from .stages import GraphHandle, batch_job, default_workdir, load_stage, write_parquet

MANIFEST = "ppr-index.json"


@dataclass(frozen=True)
class IndexHandle:
    path: str
    token: str
    info: dict

    def __dask_tokenize__(self):
        return ("IndexHandle", self.token)


def index_job(source, *, out=None, workdir=None, alpha=0.8, epsilon=0.5, delta_min=None, seed=0,
              directed=True, read_options=None, reorder=None) -> Job:  # fmt: skip
    """Build the kPAR index of a graph (nothing runs until ``pipelines.run``).

    Parameters
    ----------
    source : path, generator spec or CSRGraph
        As in ``pagerank_job``.
    out : path, optional
        Folder that receives the graph, its PageRank and the index, with a manifest
        (``ppr-index.json``) that ``topk_ppr_job(index=out)`` and ``graphjobs topk-ppr --index`` read;
        default: the workdir.
    delta_min : float or str, optional
        Smallest PPR value the index serves: a number in (0, 1], or ``"K/n"`` for K over the graph's
        vertex count; default 16/n. Smaller means more walks and a larger index, and buys precision
        where the exact values near the k-th are close: ``"2/n"`` gave precision@1000 >= 0.99 on
        R-MAT 22 and 24 (0.984 and 0.988 at the default) at about twice the index size.
    workdir, alpha, epsilon, seed, directed, read_options, reorder
        Artifact folder and ``build_ppr_index`` / ``read_edgelist`` / ``graphs.reorder`` options.

    Returns
    -------
    Job
        Its result is a summary dict: ``index`` (folder), ``n``, ``m``, walks, sizes and timings.
    """
    index_options(alpha=alpha, epsilon=epsilon)  # before anything runs
    delta_min = _delta_min(delta_min)
    workdir = Path(out or workdir or default_workdir())
    load, gtoken = load_stage(
        source, workdir=workdir, read_options={"directed": directed, **(read_options or {})}, reorder=reorder
    )
    pr_params = dict(alpha=alpha, tol=1e-12, max_iter=1000, weighted=False, dtype=np.float64)
    ptoken = tokenize("pagerank", gtoken, pr_params)
    ranks = dask.delayed(_pagerank, pure=True)(
        load,
        pr_params,
        str(workdir.resolve() / f"pagerank-{ptoken}.npy"),
        1,  # the index needs the whole graph on one device anyway
        str(workdir.resolve()),
        dask_key_name=f"graphjobs-pagerank-{ptoken}",
    )
    params = dict(alpha=alpha, epsilon=epsilon, seed=seed)
    if delta_min is not None:  # the default keeps the tokens of indexes built before the option
        params["delta_min"] = delta_min
    itoken = tokenize("ppr-index", gtoken, params)
    artifact = str(workdir.resolve() / f"ppr-index-{itoken}")
    index = dask.delayed(_index, pure=True)(
        load, ranks, params, artifact, dask_key_name=f"irw-index-{itoken}"
    )
    summary = dask.delayed(_manifest, pure=True)(
        load, index, str(workdir.resolve()), dask_key_name=f"graphjobs-index-summary-{itoken}"
    )
    return Job(
        "ppr-index",
        summary,
        workdir,
        stages={"load": load, "pagerank": ranks, "index": index, "summary": summary},
    )


def _index(graph: GraphHandle, ranks: dict, params: dict, artifact: str) -> IndexHandle:
    t0 = time.perf_counter()
    if not (Path(artifact) / "meta.json").is_file():
        g = graph.get()
        pr = to_device(np.load(ranks["path"]), g.device)
        if "delta_min" in params:
            params = {**params, "delta_min": _resolve_delta_min(params["delta_min"], g.n)}
        index = operators.build_ppr_index(g, pagerank=pr, **params)
        index.save(artifact, overwrite=True, graph=graph.path)  # load_ppr_index(artifact) finds it
    meta = json.loads((Path(artifact) / "meta.json").read_text())
    info = {**meta["info"], "delta_min": meta["delta_min"], "build_seconds": time.perf_counter() - t0}
    return IndexHandle(artifact, tokenize(artifact, meta["graph_token"], meta["seed"]), info)


def _delta_min(value):
    """``delta_min`` as the jobs take it, checked before anything runs: None, a float, or "K/n"."""
    if value is None or not isinstance(value, str):
        return None if value is None else index_options(delta_min=value)["delta_min"]
    per_n = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*/\s*n\s*", value)
    try:
        k = float(per_n.group(1) if per_n else value)
    except ValueError:
        k = math.nan
    if not k > 0:
        raise ValueError(f"delta_min={value!r}: expected a number in (0, 1] or K/n with K > 0, e.g. '2/n'")
    return f"{repr(k).removesuffix('.0')}/n" if per_n else index_options(delta_min=k)["delta_min"]


def _resolve_delta_min(value, n: int) -> float:
    """A "K/n" delta_min for a graph of n vertices (a float stays as it is)."""
    if not isinstance(value, str):
        return value
    resolved = float(value[:-2]) / n
    if resolved > 1:
        raise ValueError(f"delta_min={value}: {resolved:g} is more than 1 for a graph of n={n} vertices")
    return resolved


def _manifest(graph: GraphHandle, index: IndexHandle, folder: str) -> dict:
    manifest = {
        "graph": graph.path,
        "graph_token": graph.token,
        "index": index.path,
        "directed": graph.directed,
        "weighted": graph.weighted,
        "n": graph.n,
        "m": graph.m,
    }
    tmp = Path(folder) / f".{MANIFEST}.{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, Path(folder) / MANIFEST)
    return {"job": "ppr-index", "folder": folder, **manifest, **index.info}


def topk_ppr_job(
    source=None,
    sources=None,
    *,
    index=None,
    k=100,
    out="topk-ppr",
    workdir=None,
    chunk=1000,
    alpha=None,
    epsilon=None,
    delta_min=None,
    seed=0,
    directed=True,
    read_options=None,
    reorder=None,
    overwrite=False,
    streams=None,
) -> Job:
    """Top-k PPR of a batch of sources as a Dask graph: load -> CSR -> PageRank -> index -> queries.

    Parameters
    ----------
    source : path, generator spec or CSRGraph, optional
        The graph; the index is built (or found) in the workdir. Omit it when ``index`` is given.
    sources : label, sequence of labels, SourceText or RandomSources
        Source vertices (original labels; ``SourceText.read(path)`` for a file of them, typed as the
        graph's labels; an integer label goes in a list), or ``RandomSources(N)`` for N distinct random
        vertices (by ``seed``).
    index : path, optional
        A folder written by ``index_job(out=...)`` / ``graphjobs index``.
    k : int
        Vertices per source.
    out : path
        Folder of Parquet partitions ``part-NNNNN.parquet`` (source, rank, vertex, ppr).
    chunk : int
        Sources per task.
    workdir, alpha, epsilon, delta_min, seed, directed, read_options, reorder
        As in ``index_job`` (alpha 0.8, epsilon 0.5 and delta_min 16/n by default), which builds the
        index. With ``index``, alpha, epsilon and delta_min are the index's (given, they must match
        it) and the graph's own options do not apply. ``seed`` also seeds random sources and the
        fallback walks.
    overwrite : bool
        Replace the results of another job in ``out`` (otherwise refused). A re-run of the same job
        skips the chunks it finished before.
    streams : int, optional
        Sources a GPU worker answers at once within a chunk (``operators.topk_ppr``'s ``streams``;
        default: the operator's). CPU workers answer one at a time. The rows do not depend on it, and
        a re-run with another value resumes the same job.

    Returns
    -------
    Job
        Its result is a summary dict: ``out``, ``queries``, ``parts``, ``query_seconds_mean`` (the
        workers' time per source), ``latency_seconds_mean`` (a source's first round to its answer,
        over the sources that needed rounds), ``without_rounds`` (sources of small closed reach
        answered before any round: no out-edge to another vertex, or few vertices reachable), fallbacks,
        exact answers (sources of small closed reach, those included).
    """
    k = topk_options(k=k)["k"]  # before anything runs
    streams = None if streams is None else check_count("streams", streams)
    if index is not None:
        manifest = (
            json.loads((Path(index) / MANIFEST).read_text()) if (Path(index) / MANIFEST).is_file() else None
        )
        if manifest is None:
            raise FileNotFoundError(
                f"{index}: no {MANIFEST} here; build one with `graphjobs index INPUT --out {index}`"
            )
        building = dict(alpha=alpha, epsilon=epsilon, delta_min=delta_min, workdir=workdir, directed=directed,
                        read_options=read_options, reorder=reorder)  # fmt: skip
        _check_unused(index, manifest, source, building)
        keys = ("graph", "graph_token", "n", "m", "directed", "weighted")
        g = GraphHandle(*(manifest[key] for key in keys))
        graph, idx = (
            g,
            IndexHandle(manifest["index"], tokenize(manifest["index"], manifest["graph_token"]), {}),
        )
        workdir = Path(index)
    else:
        if source is None:
            raise ValueError("give the graph (source) or a built index folder (index=...)")
        alpha, epsilon = 0.8 if alpha is None else alpha, 0.5 if epsilon is None else epsilon
        options = dict(alpha=alpha, epsilon=epsilon, delta_min=delta_min, seed=seed, directed=directed)
        built = index_job(source, workdir=workdir, read_options=read_options, reorder=reorder, **options)
        graph, idx, workdir = built.stages["load"], built.stages["index"], built.workdir
    opts = {"index": idx, "k": k, "seed": seed}
    return batch_job("topk-ppr", graph, tokenize(graph), sources, opts, seed=seed, chunk=chunk, out=out,
                     workdir=workdir, run_chunk=_query_chunk, summarize=_summary,
                     overwrite=overwrite, tuning={"streams": streams})  # fmt: skip


def _check_unused(index, manifest: dict, source, building: dict) -> None:
    """With a built index, the options that build one must not ask for anything else (they go unused)."""
    if source is not None:
        raise ValueError(f"give the graph (source) or a built index folder (index={index!r}), not both")
    meta = json.loads((Path(manifest["index"]) / "meta.json").read_text())
    if building["delta_min"] is not None:
        building["delta_min"] = _resolve_delta_min(_delta_min(building["delta_min"]), manifest["n"])
        if math.isclose(building["delta_min"], meta["delta_min"], rel_tol=1e-12):
            building["delta_min"] = meta["delta_min"]
    for name in ("alpha", "epsilon", "delta_min"):
        if building[name] is not None and building[name] != meta[name]:
            raise ValueError(f"{name}={building[name]!r} differs from the {name} of the index in {index} "
                             f"({meta[name]!r}); build an index with it")  # fmt: skip
    graph = dict(workdir=None, directed=manifest["directed"], read_options=None, reorder=None)
    for name, have in graph.items():
        if building[name] != have and (building[name] or name == "directed"):
            raise ValueError(f"{name}={building[name]!r} applies only when the job builds the index; "
                             f"the one in {index} has its graph")  # fmt: skip


def _query_chunk(graph: GraphHandle, ids, opts: dict, path: str) -> dict:
    import pyarrow as pa

    g = graph.get()
    idx = _state.ppr_index(opts["index"].path, g)
    labels = to_host(g.ids)[ids] if g.ids is not None else ids
    streams = opts.get("streams") if g.device == "gpu" else None
    t0 = time.perf_counter()
    res = operators.topk_ppr(idx, labels, k=opts["k"], seed=opts["seed"], streams=streams)
    seconds = time.perf_counter() - t0  # with several sources at once, less than their latencies' sum
    frame = res.to_frame()
    write_parquet(pa.Table.from_pandas(frame, preserve_index=False), path)
    first = [
        (v.item() if hasattr(v, "item") else v, float(p))
        for v, p in zip(res.vertices[0][:5], res.ppr[0][:5], strict=True)
    ]
    src0 = labels[0].item() if hasattr(labels[0], "item") else labels[0]
    return dict(
        path=path,
        queries=len(ids),
        seconds=seconds,
        latency=float(res.seconds.sum()),
        without_rounds=int((res.rounds == 0).sum()),
        fallback=int(res.fallback.sum()),
        exact=int(res.exact.sum()),
        rounds=float(res.rounds.mean()),
        device=g.device,
        first=(src0, first),
    )


def _summary(graph: GraphHandle, parts: list, out: str, opts: dict) -> dict:
    queries = sum(p["queries"] for p in parts)
    early = sum(p.get("without_rounds", 0) for p in parts)  # parts of an earlier version lack it
    return {
        "job": "topk-ppr",
        "out": out,
        "n": graph.n,
        "m": graph.m,
        "k": opts["k"],
        "queries": queries,
        "parts": len(parts),
        "query_seconds_mean": sum(p["seconds"] for p in parts) / max(queries, 1),
        "latency_seconds_mean": sum(p.get("latency", 0.0) for p in parts) / max(queries - early, 1),
        "without_rounds": early,
        "fallback": sum(p["fallback"] for p in parts),
        "exact": sum(p["exact"] for p in parts),
        "device": parts[0]["device"] if parts else worker_device(),
        "first": parts[0]["first"] if parts else None,
    }
