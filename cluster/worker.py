"""Per-worker set-up: which device the worker computes on, and how many Numba threads it uses."""

from __future__ import annotations

from distributed import WorkerPlugin

# graphs (and so Numba) is imported only when needed: a worker process unpickles this plugin before it
# sets its environment, and Numba reads NUMBA_NUM_THREADS once, when it is imported

_DEVICE: str | None = None
_NUMBA_THREADS: int | None = None


def worker_device() -> str:
    """The device tasks in this process should use: set by the plugin, else 'gpu' if one is usable.
    Called from a task, it also caps the calling thread's Numba threads as the plugin was asked to."""
    if _NUMBA_THREADS is not None:
        _cap_numba_threads(_NUMBA_THREADS)
    return _DEVICE or _resolve("auto")


def _resolve(device: str) -> str:
    from graphs._device import resolve_device

    return resolve_device(device)


def _cap_numba_threads(n: int) -> None:
    """Numba's thread count is a per-thread setting, which new threads take from NUMBA_NUM_THREADS."""
    import numba

    if numba.get_num_threads() > n:
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


class GraphjobsWorker(WorkerPlugin):
    """Pins the worker's device and caps Numba's threads so workers do not oversubscribe the cores.

    Numba counts threads per thread, and Dask's task threads take the process's count: ``make_cluster``
    sets it for its CPU workers (NUMBA_NUM_THREADS), and a task thread that asks ``worker_device`` (as
    graphjobs' tasks do) is capped there too.

    Parameters
    ----------
    device : {'auto', 'cpu', 'gpu'}
        'auto': the GPU dask-cuda gave this worker, if CuPy can use it, else the CPU.
    numba_threads : int, optional
        Threads for Numba's parallel loops in this worker (default: Numba's own choice).
    """

    idempotent = True
    name = "graphjobs-worker"

    def __init__(self, device: str = "auto", numba_threads: int | None = None):
        self.device = device
        self.numba_threads = numba_threads

    def setup(self, worker=None):
        global _DEVICE, _NUMBA_THREADS
        _DEVICE = _resolve(self.device)
        if self.numba_threads:
            _NUMBA_THREADS = self.numba_threads
            _cap_numba_threads(self.numba_threads)

    def teardown(self, worker=None):
        global _DEVICE, _NUMBA_THREADS
        _DEVICE, _NUMBA_THREADS = None, None
        from pipelines import _state

        _state.clear()


def set_worker_device(device: str | None) -> None:
    """Pin this process's device (what the plugin does on a worker); None restores 'auto'."""
    global _DEVICE
    _DEVICE = None if device is None else _resolve(device)
