"""Several independent GPU queries at once: a non-blocking CUDA stream and workspace each, all driven
from the calling thread.

A top-k PPR query is a chain of kernels broken by a host read per round; with several in flight,
one query's kernels run while the host reads another's round. A query is a generator that yields once
its round is queued on its stream; ``StreamPool.interleave`` resumes whichever query's round has
arrived. (Until 2026-11-25 each query had its own thread: their host steps then contended for the GIL,
and on one H100 R-MAT 22 at k = 10 ran 1,571 queries/s on one stream, 1,289 on 4 threads and 692 on 8,
the GPU busy 63%, 54% and 36% of the time.) Workspaces are made once per slot and kept by the
``StreamPool`` for the next call. (Tried for push/pull PPR as well, at 67d7aa8: 0.3-0.9x the
one-at-a-time rate on R-MAT 22/24, whose push kernels already fill the GPU and read the host after
every iteration; not adopted there.)
"""

from __future__ import annotations

import threading
from collections import deque

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

    def interleave(self, start, items, workers: int) -> None:
        """Run the generator ``start(item, workspace)`` of every item, up to ``workers`` at once, each on
        its slot's stream. A generator yields once it has queued work on its stream and is resumed
        (on that stream) when ``workspace.ready()``, or, when none is, the one that yielded first;
        its ``estimate_finish`` then waits for its own work. The first error is raised."""
        cp = import_cupy()
        todo, running, slots = iter(items), deque(), []

        def advance(slot, gen):  # until it yields (then it waits in `running`) or every item is begun
            with slot[0]:
                while True:
                    try:
                        next(gen)
                        running.append((slot, gen))
                        return
                    except StopIteration:
                        item = next(todo, _END)
                        if item is _END:
                            return
                        gen = start(item, slot[1])

        try:
            for item in todo:
                slots.append(self._take(cp))
                advance(slots[-1], start(item, slots[-1][1]))
                if len(slots) == workers:
                    break
            while running:
                j = next((j for j, (slot, _) in enumerate(running) if slot[1].ready()), 0)
                slot, gen = running[j]
                del running[j]
                advance(slot, gen)
        finally:
            with self._lock:
                self._free.extend(slots)


_END = object()


def exhaust(gen):
    """Run a query generator to its end in one go (its steps wait for their own work); its return value."""
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value
