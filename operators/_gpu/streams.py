"""Several independent GPU queries at once: a non-blocking CUDA stream and workspace each, all driven
from the calling thread.

A top-k PPR query is a chain of kernels broken by a host read per round; with several in flight,
one query's kernels run while the host reads another's round. A query is a generator that yields once
its round is queued on its stream; ``StreamPool.interleave`` resumes whichever query's round has
arrived. All queries are driven from one thread: a thread per query would have their host steps
contend for the GIL and leave the GPU idle. Workspaces are made once per slot and kept by the
``StreamPool`` for the next call. Push/pull PPR does not use this: its push kernels already fill the
GPU and read the host after every iteration, so queries in flight only compete.
"""

from __future__ import annotations

import itertools
import threading
import warnings
from collections import deque

from graphs._device import free_memory, import_cupy
from graphs.errors import size_text
from operators._checks import check_count
from operators.errors import InsufficientMemoryError

# Below this many vertices at most 4 queries at once, from here at most 8 (tuned on the benchmark graphs:
# benchmarks/RESULTS.md, top-k section).
WIDE_FROM = 1 << 23
# ... but from this k on, 4 there too: each query then touches more of the graph, and 8 at once contend
# for the L2 (benchmarks/RESULTS.md, top-k section).
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
                f"streams={streams} (a query workspace of {size_text(per)} each, {made} kept)",
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
    """Slots of (CUDA stream, workspace); ``make()`` builds a workspace (on the caller's stream). ``close()``
    closes the kept workspaces (those with a ``close()``) and drops their streams."""

    def __init__(self, make):
        self._make, self._free, self._lock = make, [], threading.Lock()
        self.size = 0

    @property
    def idle(self) -> int:
        """Workspaces made and not in use now: a call may take them without allocating."""
        with self._lock:
            return len(self._free)

    def _take(self, cp):
        with self._lock:
            if self._free:
                return self._free.pop()
            self.size += 1
        # the workspace is allocated on the caller's stream, whose memory pool arena holds what the
        # index build and earlier calls freed: CuPy reuses a freed block only on the stream that freed
        # it, so on a new stream a large graph's workspaces could run out of memory with most of the pool
        # free. Its stream waits for the initialising kernels.
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

    def close(self) -> None:
        """Close the kept slots' workspaces, once their streams' work is done, and drop the streams; the
        pool is then empty (a later ``interleave`` makes new slots)."""
        with self._lock:
            slots, self._free = self._free, []
            self.size -= len(slots)
        for stream, workspace in slots:
            stream.synchronize()
            close = getattr(workspace, "close", None)
            if callable(close):
                close()

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
