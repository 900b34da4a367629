"""Several independent CPU solves at once, on threads: a batch of sources whose Numba loops release the GIL.

A batch takes ``cpu_threads`` threads (Numba's thread count for the calling thread: a Dask worker's share
of the cores), within what the process's other batches have left (``threads_taken``: chunks of a job on
Dask's local threaded scheduler run at once), and each thread takes the next item as it finishes one
(``for_each_on_threads``). A solve on such a thread must not start Numba's parallel loops, whose pool
is not shared between threads: the callers pass their serial variants.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

from graphs._device import free_memory

_TAKEN = [0]  # threads of CPU batches running in this process
_TAKEN_LOCK = threading.Lock()


def cpu_threads(n: int, bytes_per_vertex: int, tasks: int) -> int:
    """Threads for ``tasks`` solves on a graph of ``n`` vertices whose workspaces take ``bytes_per_vertex``:
    Numba's thread count for the calling thread, at most ``tasks``, and no more than a quarter of the
    free memory holds the extra workspaces of."""
    import numba

    room = free_memory("cpu") // (4 * bytes_per_vertex * max(n, 1))
    return max(1, min(numba.get_num_threads(), tasks, 1 + room))


@contextlib.contextmanager
def threads_taken(want: int):
    """At most ``want`` of the process's Numba threads that other batches have left, taken until the
    block ends; 1 (solve in the calling thread) when none are left."""
    import numba

    with _TAKEN_LOCK:
        threads = max(1, min(want, numba.config.NUMBA_NUM_THREADS - _TAKEN[0]))
        if threads > 1:
            _TAKEN[0] += threads
    try:
        yield threads
    finally:
        if threads > 1:
            with _TAKEN_LOCK:
                _TAKEN[0] -= threads


def for_each_on_threads(items, workers) -> None:
    """Call a worker of ``workers`` (one thread each) on every item, each thread taking the next item as
    it finishes one; the first error (or an interrupt of the caller) stops the other threads after their
    current item and is raised."""
    items, take, failed = iter(items), threading.Lock(), threading.Event()

    def run(work):
        try:
            while not failed.is_set():
                with take:
                    item = next(items, None)
                if item is None:
                    return
                work(item)
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(len(workers), thread_name_prefix="graphjobs-cpu") as pool:
        try:
            futures = [pool.submit(run, w) for w in workers]
            for done in futures:
                while True:  # waits of 0.1 s: a signal that another thread received reaches this one
                    try:
                        done.result(timeout=0.1)
                        break
                    except TimeoutError:
                        continue
        except BaseException:  # also an interrupt of the caller: the threads stop after their item
            failed.set()
            raise
