"""Per-worker set-up: which device the worker computes on, and how many Numba threads it uses."""

from __future__ import annotations

from distributed import WorkerPlugin

from graphs._device import resolve_device

_DEVICE: str | None = None


def worker_device() -> str:
    """The device tasks in this process should use: set by the plugin, else 'gpu' if one is usable."""
    return _DEVICE or resolve_device("auto")


class GraphjobsWorker(WorkerPlugin):
    """Pins the worker's device and caps Numba's threads so workers do not oversubscribe the cores.

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
        global _DEVICE
        _DEVICE = resolve_device(self.device)
        if self.numba_threads:
            import numba

            numba.set_num_threads(max(1, min(self.numba_threads, numba.config.NUMBA_NUM_THREADS)))

    def teardown(self, worker=None):
        global _DEVICE
        _DEVICE = None
        from pipelines import _state

        _state.clear()


def set_worker_device(device: str | None) -> None:
    """Pin this process's device (what the plugin does on a worker); None restores 'auto'."""
    global _DEVICE
    _DEVICE = None if device is None else resolve_device(device)
