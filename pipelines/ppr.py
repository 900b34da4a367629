"""The single-source PPR job: load -> CSR, then batches of sources -> per-source top entries in Parquet.

Sources are checked in one task before any query runs; then chunks of sources are spread over the
workers, each of which loads the graph once (``pipelines._state``) and writes its own partition
``part-NNNNN.parquet`` with columns ``source``, ``rank``, ``vertex``, ``ppr``.
"""

from __future__ import annotations

import numpy as np

import operators
from cluster.worker import worker_device
from operators.options import PPROptions

from .job import Job
from .stages import GraphHandle, chunk_memory, graph_batch_job, write_ranked
from .summary import PPRSummary

TOPK = 100  # entries kept per source by default (a default only warns when it exceeds n)


def ppr_job(
    source,
    sources,
    *,
    out="ppr",
    topk=TOPK,
    method=PPROptions.method,
    alpha=PPROptions.alpha,
    tol=PPROptions.tol,
    chunk=100,
    block=PPROptions.block,
    seed=PPROptions.seed,
    workdir=None,
    directed=True,
    read_options=None,
    reorder=None,
    overwrite=False,
) -> Job:
    """Personalized PageRank of a batch of sources as a Dask graph (nothing runs until ``run``).

    Parameters
    ----------
    source : path, generator spec or CSRGraph
        The graph, as in ``pagerank_job``.
    sources : label, sequence of labels, SourceText or RandomSources
        Source vertices (original labels; ``SourceText.read(path)`` for a file of them, typed as the
        graph's labels; an integer label goes in a list), or ``RandomSources(N)`` for N distinct random
        vertices (by ``seed``).
    out : path
        Folder of Parquet partitions ``part-NNNNN.parquet`` (source, rank, vertex, ppr).
    topk : int
        Entries kept per source.
    method, alpha, tol
        As in ``operators.ppr``: ``tol`` bounds each source's L1 error against exact PPR (the summary's
        ``l1_bound_max`` is the largest certified bound), so the written top entries are exact to it.
    chunk : int
        Sources per task (one ``operators.ppr`` call: on the GPU they are solved together in batches
        of ``block``).
    block : int, optional
        ``operators.ppr``'s sources per batch (default: its own).
    seed : int
        Seed of random sources and of Monte Carlo walks.
    workdir, directed, read_options, reorder
        Artifact folder and ``read_edgelist`` / ``graphs.reorder`` options.
    overwrite : bool
        Replace the results of another job in ``out`` (otherwise refused). A re-run of the same job
        skips the chunks it finished before.

    Returns
    -------
    Job
        Its result is a ``PPRSummary``: ``out``, ``queries``, ``parts``, mean seconds and iterations,
        ``l1_bound_max``,
        ``sources_short`` (sources with fewer than ``topk`` rows: only vertices of positive PPR are
        written) and ``compile_seconds`` (the workers' one-time compilation, not in the seconds).
    """
    options = PPROptions(topk=topk, method=method, alpha=alpha, tol=tol, seed=seed, block=block)  # first
    return graph_batch_job(
        "ppr",
        source,
        sources,
        {"options": options},
        workdir=workdir,
        directed=directed,
        read_options=read_options,
        reorder=reorder,
        seed=seed,
        chunk=chunk,
        out=out,
        run_chunk=_chunk,
        summarize=_summary,
        overwrite=overwrite,
        per_source=("topk", topk, TOPK),
    )


def _chunk(graph: GraphHandle, ids, opts: dict, path: str, progress=None) -> dict:
    g = graph.get()
    labels = g.labels_of(ids)
    info: dict = {}
    memory = _memory(g, opts["options"], len(labels))
    vertices, values = operators.ppr(g, labels, info=info, options=opts["options"], progress=progress)
    counts = np.asarray(info["counts"], dtype=np.int64)
    first = write_ranked(labels, vertices, values, counts, "ppr", path)
    return dict(
        path=path,
        queries=len(labels),
        seconds=float(sum(info["seconds"])),  # without the one-time compilation (compile_seconds)
        compile_seconds=float(info["compile_seconds"]),
        short=int((counts < vertices.shape[1]).sum()),
        iterations=[i for i in info["iterations"] if i is not None],
        models=info["models"][0],
        l1_bound_max=max((b for b in info["l1_bound"] if b is not None), default=None),
        device=g.device,
        first=first,
        memory=memory,
    )


def _memory(g, options, count: int) -> dict | None:
    """The chunk's memory estimate, checked before it allocates (``InsufficientMemoryError`` naming what
    would fit): the GPU power iteration's, or on the CPU ``_host_estimate``'s; None for the GPU's push,
    pull and hybrid."""
    if g.device == "cpu":
        hint = "a machine with more memory, or a smaller --chunk"
        estimate = _host_estimate(g, options, count)
        shared = ("graph", "transpose", "weighted transpose")  # kept with the graph for every chunk
        return chunk_memory(estimate.check(hint), sum(b for p, b in estimate.parts if p not in shared))
    power = options.method == "power" or (options.method == "auto" and options.r_max is None)
    if not power:
        return None
    from operators._gpu.memory import ppr_power_estimate
    from operators.ppr.power_gpu import LANES, block_size

    batch = max(1, min(options.block or block_size(g.n), LANES, count))
    estimate = ppr_power_estimate(g.n, g.m, batch)
    hint = "a smaller --chunk or block (sources iterated together), or a GPU with more memory"
    return chunk_memory(estimate.check(hint), dict(estimate.parts)["transpose build or iterates"])


def _host_estimate(g, options, count: int):
    """A CPU chunk's memory: the graph (held), what its method derives from it (the transpose, or power
    iteration's weighted transpose, unless kept already), the workspaces of the sources solved at once
    (``operators._cpu_threads.cpu_threads``: a second thread only where a quarter of the free memory
    holds its workspace) or power iteration's iterates, and the chunk's top rows."""
    from operators._cpu_threads import cpu_threads
    from operators._gpu.memory import MemoryEstimate, graph_bytes
    from operators.ppr import CPU_SOLVE_BYTES, MC_CHUNK
    from operators.ppr.power import CPU_BLOCK

    method = "powerpush" if options.method == "auto" else options.method
    n, m = g.n, g.m
    gb = graph_bytes(n, m)
    parts, held = [("graph", gb)], ["graph"]
    if method == "power":
        block = max(1, min(options.block or CPU_BLOCK, count))
        parts += [("weighted transpose", gb + 8 * m + n), ("iterates", 3 * 8 * n * block)]  # x, y, |y - x|
        held += ["weighted transpose"] if g.has_derived("ppr_transition") else []
    elif method == "montecarlo":  # per batch of MC_CHUNK walks: their ends (and the end counts)
        parts.append(("a batch of walks", 8 * MC_CHUNK + 3 * 8 * (n + 1)))
    else:
        if method != "powerpush":
            parts.append(("transpose", gb))
            held += ["transpose"] if g.has_derived("transpose") else []
        solves = cpu_threads(n, CPU_SOLVE_BYTES, count)  # what operators.ppr runs at once
        parts.append(("the solves' workspaces", CPU_SOLVE_BYTES * n * solves))
    parts.append(("top rows", 16 * count * (options.topk or n)))
    return MemoryEstimate(
        f"PPR of {count} source(s), n={n:,}, m={m:,} ({method})", "cpu", tuple(parts), tuple(held)
    )


def _summary(graph: GraphHandle, parts: list, out: str, opts: dict) -> PPRSummary:
    iterations = [i for p in parts for i in p["iterations"]]
    bounds = [p["l1_bound_max"] for p in parts if p.get("l1_bound_max") is not None]
    o = opts["options"]
    return PPRSummary.from_parts(
        graph,
        parts,
        out,
        worker_device(),
        topk=o.topk,
        method=o.method,
        alpha=o.alpha,
        tol=o.tol,
        seed=o.seed,
        block=o.block,
        iterations_mean=float(np.mean(iterations)) if iterations else None,
        models_first=parts[0]["models"] if parts else None,
        l1_bound_max=max(bounds) if bounds else None,
    )
