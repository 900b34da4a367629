"""The SimRank job: load -> CSR, then batches of sources -> each source's top-k similar vertices in Parquet.

Sources are checked in one task before any query runs; then chunks of sources are spread over the
workers, each of which loads the graph once (``pipelines._state``) and writes its own partition
``part-NNNNN.parquet`` with columns ``source``, ``rank``, ``vertex``, ``simrank``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import operators
from cluster.worker import worker_device
from graphs._device import to_host
from operators.options import SimRankOptions
from operators.simrank import cpu as simrank_cpu
from operators.simrank import simrank_samples

from . import _output
from ._progress import eta
from .job import Job
from .stages import GraphHandle, chunk_memory, graph_batch_job, write_ranked
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


# Meeting samples a CPU thread draws per second (about; the walks are short and cache-bound), for the
# cost stated before a long job starts; a source whose samples take longer than LONG_SECONDS is stated
CPU_SAMPLES_PER_THREAD_SECOND = 1.5e7
LONG_SECONDS = 30.0
LONG_GPU_SAMPLES = 1e11
_stated: set = set()  # (output folder, options) whose cost this process has stated: once per job
_stated_lock = threading.Lock()


def cost_line(g, label, count: int, options: SimRankOptions) -> str | None:
    """The warning stated before a job whose first source draws ``count`` meeting samples, where that is
    long (``LONG_SECONDS`` by the CPU's rate, ``LONG_GPU_SAMPLES`` on a GPU); None otherwise."""
    what = (
        f"simrank draws {count:.2g} meeting samples for source {label} "
        f"(epsilon={options.epsilon:g}, samples={options.samples!r}"
        + (": the accuracy bound's count, growing as 1/epsilon^2)" if options.samples == "bound" else ")")
    )
    advice = "; a larger --epsilon needs fewer (--samples practical: far fewer, without the guarantee)"
    if g.device == "gpu":
        return what + advice if count >= LONG_GPU_SAMPLES else None
    threads = simrank_cpu.threads()
    seconds = count / (CPU_SAMPLES_PER_THREAD_SECOND * threads)
    if seconds < LONG_SECONDS:
        return None
    return f"{what}, about {eta(seconds)} per source on {threads} CPU threads{advice}"


def _state_cost(g, labels, options: SimRankOptions, path: str) -> None:
    """Warn, once per job in this process, when its first source's samples take long (``cost_line``)."""
    with _stated_lock:
        job = (Path(path).parent, options)  # a re-run with other options states its own cost
        if not len(labels) or job in _stated:
            return
        _stated.add(job)
    line = cost_line(g, labels[0], simrank_samples(g, labels[0], options=options), options)
    if line is not None:
        _output.warn(line)


_MORE = {
    "gpu": "a GPU with more memory, or --device cpu",
    "cpu": "a machine with more memory, or a larger --epsilon",
}


def _estimate(g, options):
    """The memory of a query on ``g``'s device (``operators._gpu.memory.simrank_estimate``)."""
    from operators._gpu.memory import simrank_estimate
    from operators.simrank.plan import levels

    return simrank_estimate(g.n, g.m, levels(options.c, options.epsilon), g.device)


def _chunk(graph: GraphHandle, ids, opts: dict, path: str, progress=None) -> dict:
    g = graph.get()
    labels = to_host(g.ids)[ids]
    # checked before anything of the query is allocated (the cost line plans it)
    memory = chunk_memory(_estimate(g, opts["options"]).check(_MORE[g.device]), 0)
    _state_cost(g, labels, opts["options"], path)
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
