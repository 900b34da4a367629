"""The SimRank job: load -> CSR, then batches of sources -> each source's top-k similar vertices in Parquet.

Sources are checked in one task before any query runs; then chunks of sources are spread over the
workers, each of which loads the graph once (``pipelines._state``) and writes its own partition
``part-NNNNN.parquet`` with columns ``source``, ``rank``, ``vertex``, ``simrank``.
"""

from __future__ import annotations

import operators
from cluster.worker import worker_device
from graphs._device import to_host
from operators.options import SimRankOptions

from .job import Job
from .stages import GraphHandle, graph_batch_job, write_ranked
from .summary import SimRankSummary


def simrank_job(
    source,
    sources,
    *,
    k=SimRankOptions.k,
    out="simrank",
    c=SimRankOptions.c,
    epsilon=SimRankOptions.epsilon,
    clip=SimRankOptions.clip,
    samples=SimRankOptions.samples,
    seed=SimRankOptions.seed,
    chunk=10,
    workdir=None,
    directed=True,
    read_options=None,
    overwrite=False,
) -> Job:
    """Single-source SimRank of a batch of sources as a Dask graph (nothing runs until ``run``).

    Parameters
    ----------
    source : path, generator spec or CSRGraph
        The graph, as in ``pagerank_job``; an undirected input is used as both directions.
    sources : label, sequence of labels, SourceText or RandomSources
        Source vertices (original labels; ``SourceText.read(path)`` for a file of them, typed as the
        graph's labels; an integer label goes in a list), or ``RandomSources(N)`` for N distinct random
        vertices (by ``seed``).
    k : int
        Most similar vertices kept per source (the source itself excluded; only those of positive
        score are written).
    out : path
        Folder of Parquet partitions ``part-NNNNN.parquet`` (source, rank, vertex, simrank).
    c, epsilon, clip, samples, seed
        As in ``operators.simrank``.
    chunk : int
        Sources per task.
    workdir, directed, read_options
        Artifact folder and ``read_edgelist`` options.
    overwrite : bool
        Replace the results of another job in ``out`` (otherwise refused). A re-run of the same job
        skips the chunks it finished before.

    Returns
    -------
    Job
        Its result is a ``SimRankSummary``: ``out``, ``queries``, ``parts``, mean seconds per source,
        ``sources_short`` (sources with fewer than k rows) and ``compile_seconds`` (the workers'
        one-time compilation, not in the seconds).
    """
    options = SimRankOptions(k=k, c=c, epsilon=epsilon, clip=clip, samples=samples, seed=seed)  # first
    return graph_batch_job(
        "simrank",
        source,
        sources,
        {"options": options},
        workdir=workdir,
        directed=directed,
        read_options=read_options,
        seed=seed,
        chunk=chunk,
        out=out,
        run_chunk=_chunk,
        summarize=_summary,
        overwrite=overwrite,
        per_source=("k", k, SimRankOptions.k),
    )


def _chunk(graph: GraphHandle, ids, opts: dict, path: str, progress=None) -> dict:
    g = graph.get()
    labels = to_host(g.ids)[ids]
    memory = None
    if g.device == "gpu":  # checked before the operator allocates
        from operators._gpu.memory import simrank_estimate

        memory = simrank_estimate(g.n, g.m).check("a GPU with more memory, or --device cpu")
    res = operators.simrank_topk(g, labels, options=opts["options"], progress=progress)
    first = write_ranked(labels, res.vertices, res.scores, res.counts, "simrank", path)
    return dict(
        path=path,
        queries=len(labels),
        seconds=float(res.seconds.sum()),
        device=g.device,
        first=first,
        compile_seconds=float(res.compile_seconds),
        short=int((res.counts < res.vertices.shape[1]).sum()),
        memory=memory,
    )


def _summary(graph: GraphHandle, parts: list, out: str, opts: dict) -> SimRankSummary:
    o = opts["options"]
    return SimRankSummary.from_parts(
        graph,
        parts,
        out,
        worker_device(),
        k=o.k,
        c=o.c,
        epsilon=o.epsilon,
        clip=o.clip,
        samples=o.samples,
        seed=o.seed,
    )
