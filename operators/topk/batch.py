"""How a top-k PPR batch runs its sources' rounds (``topk_ppr``): on the calling thread's workspace one
after another, on several GPU workspaces with their rounds interleaved (``_streams``), or on the CPU
on threads, a workspace each (``_cpu_threads``; the query's loops release the GIL); in a GPU batch of at
least L2_HINT_SOURCES such sources the GPU fetches 32 bytes per L2 miss meanwhile (the rounds' kernels
read vertex records at random).
"""

from __future__ import annotations

import contextlib
import threading

from operators._cpu_threads import cpu_threads, for_each_on_threads, threads_taken
from operators._gpu.launch import l2_fetch_granularity
from operators._gpu.streams import StreamPool, exhaust

# bytes fetched per L2 miss while a GPU batch's rounds run (64 by default): the rounds read vertex
# records at random, so smaller fetches move fewer unused bytes from DRAM (benchmarks/RESULTS.md, top-k
# section)
L2_FETCH_BYTES = 32
# setting the hint and restoring it costs about a single-source call's own time: only calls with at
# least this many sources left to rounds set it, so that the saving outweighs that fixed cost
L2_HINT_SOURCES = 256
CPU_WORKSPACE_BYTES = 37  # per vertex: residues, reserves, marks, touched list, queue, refine's cache
CPU_CONSTANT_BYTES = 24  # per vertex, once per index: the CPU queries' degrees, ones and omega (float64)


def workspace(index):
    """The calling thread's query workspace for ``index`` (kept with the index, one per thread, until
    ``index.forget_workspaces()`` closes it)."""
    cache = index.cache.setdefault("workspaces", dict)
    key = threading.get_ident()
    ops = cache.get(key)
    if ops is None:
        if index.graph.device == "gpu":
            from operators.topk.gpu import GPUQuery as Query
        else:
            from operators.topk.cpu import CPUQuery as Query
        ops = cache[key] = Query(index)
    return ops


def answer_all(answer, todo, streams, index, ops) -> None:
    """Run ``answer`` (a generator per source) for every (row, source) of ``todo``: one after another,
    or on ``streams`` GPU workspaces interleaved; ``ops`` is ``workspace(index)``."""
    hint = index.graph.device == "gpu" and len(todo) >= L2_HINT_SOURCES
    with l2_fetch_granularity(L2_FETCH_BYTES) if hint else contextlib.nullcontext():
        _answer_all(answer, todo, streams, index, ops)


def _answer_all(answer, todo, streams, index, ops) -> None:
    if index.graph.device == "gpu":
        ops.replay = True  # rounds as CUDA graphs where they may be (``_topk_gpu_graph``)
    if streams > 1:  # the first alone (it builds every kernel), the others interleaved
        from operators.topk.gpu import GPUQuery
        from operators.topk.gpu.push import persistent_blocks

        exhaust(answer(*todo[0], ops))
        blocks = persistent_blocks(streams)  # cooperative grids in flight together must all fit

        def answer_in(item, work):
            work.blocks, work.in_flight, work.replay = blocks, streams, True
            return answer(*item, work)

        pool = index.cache.setdefault("stream_pool", lambda: StreamPool(lambda: GPUQuery(index)))
        pool.interleave(answer_in, todo[1:], streams)
        return
    if index.graph.device == "cpu":
        with threads_taken(cpu_threads(index.graph.n, CPU_WORKSPACE_BYTES, len(todo))) as threads:
            if threads > 1:
                _answer_on_threads(answer, todo, threads, index, ops)
                return
    for i, s in todo:
        exhaust(answer(i, s, ops))


def _answer_on_threads(answer, todo, threads, index, ops) -> None:
    """``threads`` sources at once on the CPU, each thread on a workspace of its own (``ops`` and spares
    kept with the index, lent to one call at a time), whose Alg. 6 runs serially."""
    from operators.topk.cpu import CPUQuery

    lock, spares = index.cache.setdefault("cpu_spares", lambda: (threading.Lock(), []))
    with lock:
        works = [spares.pop() for _ in range(min(threads - 1, len(spares)))]
    works = [ops, *works, *(CPUQuery(index) for _ in range(threads - 1 - len(works)))]
    for work in works:
        work.serial = True
    try:
        for_each_on_threads(todo, [lambda item, w=w: exhaust(answer(*item, w)) for w in works])
    finally:
        for work in works:
            work.serial = False
        with lock:
            spares.extend(works[1:])
