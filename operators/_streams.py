"""Several independent GPU queries at once: one thread, non-blocking CUDA stream and workspace each.

A top-k PPR query is a chain of kernels broken by a host read per round; with several in flight,
one query's kernels run while another waits on its read. Workspaces are made once per slot and kept by
the ``StreamPool`` for the next call. (Tried for push/pull PPR as well, at 67d7aa8: 0.3-0.9x the
one-at-a-time rate on R-MAT 22/24, whose push kernels already fill the GPU and read the host after
every iteration; not adopted there.)
"""

from __future__ import annotations

import threading

from graphs._device import free_memory, import_cupy

from ._checks import check_count

# Default concurrency from this many vertices. Measured on an H100, top-k PPR over 2,000 sources:
# R-MAT 22 and 24 answered 1.5-1.7x faster on 8 streams (ba534ae; 1.4-2.4x with the paper's push
# schedule at e821395); soc-Epinions1 and soc-Slashdot0902 (80k vertices, queries of a few ms, mostly
# Python and launches) 0.57-0.67x as fast at e821395: the threads only contend for the GIL.
CONCURRENT_FROM = 1 << 20
# Below this many vertices at most 4 at once: a query's GPU work is small enough that more threads
# mostly contend for the GIL. R-MAT 22, 2,000 sources, two passes on each of two H100 instances
# (82d6c1b, then 2e4c8f9 alternating 4 and 8), queries/s on 4 against 8 streams: k=100 2,158 and
# 1,852 against 1,526 and 1,517, then 1,812 and 2,195 against 1,750 and 1,748; k=10 1,432-1,907
# against 1,379-1,600 (noisy); k=1000 767-769 against 793-797 (8 ahead by 3%). R-MAT 23: within 4%
# either way. R-MAT 24 (left at 8) is mixed: k=10 8 ahead on the first instance (1,509-1,577 against
# 1,379-1,391), behind on the second (1,187-1,230 against 1,256-1,390); k=100 level, then 8 ahead by 7%.
WIDE_FROM = 1 << 23


def stream_count(G, queries: int, streams, bytes_per_vertex: int) -> int:
    """How many queries to run at once: ``streams`` if given (GPU only), else 1 below
    ``CONCURRENT_FROM`` vertices and, of those that fit twice in free device memory, up to 4 below
    ``WIDE_FROM`` and up to 8 from there; never more than ``queries``."""
    if streams is not None:
        streams = check_count("streams", streams)
        if streams > 1 and G.device != "gpu":
            raise ValueError(f"streams={streams} needs the graph on the GPU; the CPU answers sources in turn")
    if G.device != "gpu":
        return 1
    if streams is None:
        if G.n < CONCURRENT_FROM:
            return 1
        most = 8 if G.n >= WIDE_FROM else 4
        streams = max(1, min(most, free_memory("gpu") // (2 * bytes_per_vertex * max(G.n, 1))))
    return max(1, min(streams, queries))


class StreamPool:
    """Slots of (CUDA stream, workspace); ``make()`` builds a workspace, on its slot's stream."""

    def __init__(self, make):
        self._make, self._free, self._lock = make, [], threading.Lock()
        self.size = 0

    def _take(self, cp):
        with self._lock:
            if self._free:
                return self._free.pop()
            self.size += 1
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            return stream, self._make()

    def map(self, fn, items, workers: int) -> list:
        """``[fn(item, workspace) for item in items]`` on ``workers`` threads, in order; the first error
        is raised. Each result is complete (its stream synchronised) when returned."""
        from concurrent.futures import ThreadPoolExecutor

        cp = import_cupy()
        device = cp.cuda.Device().id
        local, held = threading.local(), []

        def run(item):
            if not hasattr(local, "slot"):
                cp.cuda.Device(device).use()
                local.slot = self._take(cp)
                held.append(local.slot)
            stream, work = local.slot
            with stream:
                out = fn(item, work)
                stream.synchronize()
            return out

        try:
            with ThreadPoolExecutor(workers, thread_name_prefix="graphjobs-stream") as pool:
                return list(pool.map(run, items))
        finally:
            with self._lock:
                self._free.extend(held)
