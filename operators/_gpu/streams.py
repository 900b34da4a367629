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

import itertools
import threading
import warnings
from collections import deque

from graphs._device import free_memory, import_cupy
from operators._checks import check_count
from operators.errors import InsufficientMemoryError

# Below this many vertices at most 4 queries at once, from here at most 8. One H100, 10,000 sources,
# the queries interleaved from one thread (735ce4f, results/topk-gpu-h100-735ce4f.jsonl), queries/s on
# 4 streams against 1: soc-Slashdot0902 k=10/100/1000 2,259 / 1,684 / 1,047 against 1,487 / 907 / 515,
# soc-Epinions1 2,642 / 2,183 / 1,228 against 1,824 / 1,218 / 621 (with a thread per query, before,
# they had lost 0.57-0.67x there: e821395); R-MAT 22 2,050-2,348 / 2,468-2,577 / 844-846 against 1,748
# / 1,385 / 603; R-MAT 24 on 8 against 4: 1,636 / 976 / 429 against 1,508 / 990 / 445 (with threads at
# 82d6c1b and 2e4c8f9 it was mixed between instances too, and 4 led 8 at R-MAT 22 by up to 41%).
WIDE_FROM = 1 << 23
# ... but from this k on, 4 there too: each query then touches more of the graph, and 8 at once contend
# for the L2. R-MAT 24, 4,000 sources, same call, both orders (results/topk-streams-by-k-ab-h100.txt): 4
# against 8 streams 1.036-1.042x at k = 100, 1.051-1.061x at k = 300, 1.075-1.082x at k = 1000, 0.86x at
# k = 10; the benchmark's own 4-stream runs since 735ce4f agree (k = 1000 ahead in all 13, k = 100 in 10).
NARROW_K = 100


def stream_count(G, queries: int, streams, bytes_per_vertex: int, k: int | None = None, made: int = 0) -> int:
    """How many queries to run at once: ``streams`` if given (GPU only; an ``InsufficientMemoryError``
    before any work when their workspaces do not fit), else, of those whose workspaces fit twice in free
    device memory, up to 8 from ``WIDE_FROM`` vertices for ``k`` below ``NARROW_K``, otherwise up to 4;
    never more than ``queries``. ``made``: workspaces kept from earlier calls (a ``StreamPool``'s), which
    need no memory."""
    if streams is not None:
        streams = check_count("streams", streams)
        if streams > 1 and G.device != "gpu":
            raise ValueError(
                f"streams={streams} needs the graph on the GPU; the CPU answers "
                "numba.get_num_threads() sources at once (numba.set_num_threads sets it)"
            )
    if G.device != "gpu":
        return 1
    if streams is None:
        if queries <= 1:  # no memory query for a call of one or two sources
            return 1
        most = 8 if G.n >= WIDE_FROM and (k is None or k < NARROW_K) else 4
        return max(1, min(most, workspaces_that_fit(G, bytes_per_vertex, made), queries))
    per = bytes_per_vertex * max(G.n, 1)
    streams = max(1, min(streams, queries))
    new = streams - made
    if streams > 1 and new > 0:
        free = free_memory("gpu")
        if new * per > free:
            raise InsufficientMemoryError(
                f"streams={streams} (a query workspace of {per / 2**30:.2f} GiB each, {made} kept)",
                new * per,
                free,
                f"at most streams={made + free // per} fit; leave streams to the default to choose",
            )
    return streams


def workspaces_that_fit(G, bytes_per_vertex: int, made: int = 0) -> int:
    """Query workspaces the default allows on the GPU: the ``made`` ones kept, and as many new ones as
    have twice their bytes free (free memory is an estimate; the margin keeps room for the queries)."""
    return made + free_memory("gpu") // (2 * bytes_per_vertex * max(G.n, 1))


class StreamPool:
    """Slots of (CUDA stream, workspace); ``make()`` builds a workspace (on the caller's stream)."""

    def __init__(self, make):
        self._make, self._free, self._lock = make, [], threading.Lock()
        self.size = 0

    def _take(self, cp):
        with self._lock:
            if self._free:
                return self._free.pop()
            self.size += 1
        # the workspace is allocated on the caller's stream, whose memory pool arena holds what the
        # index build and earlier calls freed: CuPy reuses a freed block only on the stream that freed
        # it, so on a new stream R-MAT 26 (1.5 billion edges) ran out of memory at the fourth of 4
        # workspaces with 27 GiB free in the pool. Its stream waits for the initialising kernels.
        # Each query's last step is a host read of its stream, so no work of a slot is pending when
        # a call returns, and the memory can go back to the caller's stream when the slot is dropped.
        try:
            stream = cp.cuda.Stream(non_blocking=True)
            workspace = self._make()
        except BaseException:
            with self._lock:
                self.size -= 1
            raise
        ready = cp.cuda.Event(block=False, disable_timing=True)
        ready.record()
        stream.wait_event(ready)
        return stream, workspace

    def interleave(self, start, items, workers: int) -> None:
        """Run the generator ``start(item, workspace)`` of every item, up to ``workers`` at once, each on
        its slot's stream. A generator yields once it has queued work on its stream and is resumed
        (on that stream) when ``workspace.ready()``, or, when none is, the one that yielded first;
        its ``estimate_finish`` then waits for its own work. The first error is raised. A workspace that
        finds no memory (free memory is an estimate: the pool's free bytes may be fragmented) leaves the
        call to the slots made so far, with a warning."""
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
                try:
                    slots.append(self._take(cp))
                except MemoryError as exc:  # CuPy's OutOfMemoryError is one
                    if not slots:
                        raise
                    warnings.warn(
                        f"{len(slots)} of {workers} GPU query workspaces fit in memory ({exc}); "
                        f"running {len(slots)} at once",
                        RuntimeWarning,
                        stacklevel=5,  # topk_ppr's caller
                    )
                    # begun by the first slot that comes free: each slot made holds a query in flight,
                    # since a slot's queries are begun until one yields or none is left
                    todo = itertools.chain([item], todo)
                    break
                advance(slots[-1], start(item, slots[-1][1]))
                if len(slots) == workers:
                    break
            while running:
                j = next((j for j, (slot, _) in enumerate(running) if slot[1].ready()), 0)
                slot, gen = running[j]
                del running[j]
                advance(slot, gen)
        except BaseException:  # the others' queued work finishes before their memory can be reused
            for stream, _ in slots:
                stream.synchronize()
            raise
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
