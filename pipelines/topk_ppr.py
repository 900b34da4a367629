"""The top-k PPR job: load -> CSR -> PageRank -> IRW index (``pipelines.ppr_index``), then query
batches -> Parquet partitions.

``topk_ppr_job`` answers a batch of sources from a file, a generator spec or an index folder.
Sources are checked in one task before any query runs; then chunks of sources are spread over the
workers, each of which loads the graph and the index once (``pipelines._state``) and writes its own
partition ``part-NNNNN.parquet`` with columns ``source``, ``rank``, ``vertex``, ``ppr``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from dask.base import tokenize

import operators
from cluster.worker import worker_device
from graphs.errors import OptionError
from graphs.store import read_json
from operators._checks import check_count
from operators.options import IndexOptions, TopkOptions

from . import _state
from .job import Job
from .ppr_index import IndexHandle, _delta_min, _resolve_delta_min, index_job, read_manifest
from .stages import GraphHandle, batch_job, chunk_memory, first_rows, job_hint, write_parquet
from .summary import TopkSummary


def topk_ppr_job(
    source=None,
    sources=None,
    *,
    index=None,
    k=TopkOptions.k,
    out="topk-ppr",
    workdir=None,
    chunk=1000,
    alpha=None,
    epsilon=None,
    delta_min=None,
    seed=TopkOptions.seed,
    directed=True,
    read_options=None,
    reorder=None,
    overwrite=False,
    streams=None,
    refine=TopkOptions.refine,
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
        default: the operator's). CPU workers answer as many sources at once as they have Numba
        threads. The rows do not depend on it, and a re-run with another value resumes the same job.
    refine : bool
        Re-estimate the vertices near each source's k-th estimate from their in-neighbours'
        (``operators.topk_ppr``'s ``refine``, on by default): higher precision for 7-45% more time a query.
        It changes the rows, so it is part of the job (a re-run with the other value is another job).

    Returns
    -------
    Job
        Its result is a ``TopkSummary``: ``out``, ``queries``, ``parts``, ``query_seconds_mean`` (the
        workers' time per source), ``latency_seconds_mean`` (a source's first round to its answer,
        over the sources that needed rounds), ``without_rounds`` (sources of small closed reach
        answered before any round: no out-edge to another vertex, or few vertices reachable), fallbacks,
        exact answers (sources of small closed reach, those included), ``sources_short`` (sources that
        reach fewer than k vertices: only vertices of positive PPR are written) and ``compile_seconds``
        (the workers' one-time compilation, in none of the seconds above).
    """
    query = TopkOptions(k=k, seed=seed, refine=refine)  # before anything runs
    streams = None if streams is None else check_count("streams", streams)
    if index is not None:
        manifest = read_manifest(index)
        building = dict(
            alpha=alpha,
            epsilon=epsilon,
            delta_min=delta_min,
            workdir=workdir,
            directed=directed,
            read_options=read_options,
            reorder=reorder,
        )
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
            raise OptionError("give the graph (source) or a built index folder (index=...)")
        alpha = IndexOptions.alpha if alpha is None else alpha
        epsilon = IndexOptions.epsilon if epsilon is None else epsilon
        options = dict(alpha=alpha, epsilon=epsilon, delta_min=delta_min, seed=seed, directed=directed)
        built = index_job(source, workdir=workdir, read_options=read_options, reorder=reorder, **options)
        graph, idx, workdir = built.stages["load"], built.stages["index"], built.workdir
    opts = {"index": idx, "options": query}
    return batch_job(
        "topk-ppr",
        graph,
        tokenize(graph),
        sources,
        opts,
        seed=seed,
        chunk=chunk,
        out=out,
        workdir=workdir,
        run_chunk=_query_chunk,
        summarize=_summary,
        overwrite=overwrite,
        per_source=("k", query.k, TopkOptions.k),
        tuning={"streams": streams},
    )


def _check_unused(index, manifest: dict, source, building: dict) -> None:
    """With a built index, the options that build one must not ask for anything else (they go unused)."""
    if source is not None:
        raise OptionError(f"give the graph (source) or a built index folder (index={index!r}), not both")
    meta = read_json(Path(manifest["index"]) / "meta.json")
    if building["delta_min"] is not None:
        building["delta_min"] = _resolve_delta_min(_delta_min(building["delta_min"]), manifest["n"])
        if math.isclose(building["delta_min"], meta["delta_min"], rel_tol=1e-12):
            building["delta_min"] = meta["delta_min"]
    for name in ("alpha", "epsilon", "delta_min"):
        if building[name] is not None and building[name] != meta[name]:
            raise OptionError(
                f"{name}={building[name]!r} differs from the {name} of the index in {index} "
                f"({meta[name]!r}); build an index with it"
            )
    graph = dict(workdir=None, directed=manifest["directed"], read_options=None, reorder=None)
    for name, have in graph.items():
        if building[name] != have and (building[name] or name == "directed"):
            raise OptionError(
                f"{name}={building[name]!r} applies only when the job builds the index; "
                f"the one in {index} has its graph"
            )


def _query_chunk(graph: GraphHandle, ids, opts: dict, path: str, progress=None) -> dict:
    import pyarrow as pa

    device = worker_device()
    g = graph.get("cpu")  # for the labels: on a GPU only the index's graph is held, not this one beside it
    idx = _state.ppr_index(opts["index"].path, g, device)
    labels = g.labels_of(ids)
    streams = opts.get("streams") if device == "gpu" else None
    t0 = time.perf_counter()
    more = (
        "a smaller --streams, fewer chunks at once, or a GPU"
        if device == "gpu"
        else "fewer chunks at once, or a machine"
    )
    with job_hint(f"--no-refine, {more} with more memory"):
        res = operators.topk_ppr(idx, labels, streams=streams, options=opts["options"], progress=progress)
    memory = None
    if res.memory is not None:  # the estimate the operator checked; its share of each chunk's own
        parts = res.memory["parts"]
        memory = chunk_memory(
            res.memory, parts["workspaces kept"] + parts["in-edges build or new workspaces"]
        )
    # with several sources at once, less than their latencies' sum; the one-time compilation apart
    seconds = time.perf_counter() - t0 - res.compile_seconds
    frame = res.to_frame()  # the real rows only
    write_parquet(pa.Table.from_pandas(frame, preserve_index=False), path)
    return dict(
        path=path,
        queries=len(ids),
        seconds=seconds,
        compile_seconds=float(res.compile_seconds),
        short=int((res.counts < res.vertices.shape[1]).sum()),
        latency=float(res.seconds.sum()),
        without_rounds=int((res.rounds == 0).sum()),
        fallback=int(res.fallback.sum()),
        exact=int(res.exact.sum()),
        rounds=float(res.rounds.mean()),
        refined=int((res.refined > 0).sum()),
        device=device,
        first=first_rows(labels, res.vertices, res.ppr, res.counts),
        memory=memory,
    )


def _summary(graph: GraphHandle, parts: list, out: str, opts: dict) -> TopkSummary:
    queries = sum(p["queries"] for p in parts)
    early = sum(p.get("without_rounds", 0) for p in parts)  # parts of an earlier version lack it
    return TopkSummary.from_parts(
        graph,
        parts,
        out,
        worker_device(),
        k=opts["options"].k,
        latency_seconds_mean=sum(p.get("latency", 0.0) for p in parts) / max(queries - early, 1),
        without_rounds=early,
        fallback=sum(p["fallback"] for p in parts),
        exact=sum(p["exact"] for p in parts),
        refine=opts["options"].refine,
        refined=sum(p.get("refined", 0) for p in parts),
    )
