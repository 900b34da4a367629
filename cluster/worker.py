"""Per-worker set-up: which device the worker computes on, and how many Numba threads it uses."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from distributed import WorkerPlugin

# graphs (and so Numba) is imported only when needed: a worker process unpickles this plugin before it
# sets its environment, and Numba reads NUMBA_NUM_THREADS once, when it is imported


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
        self._resolved: str | None = None
        self._teardown: list[Callable[[], None]] = []

    def __getstate__(self):
        return {"device": self.device, "numba_threads": self.numba_threads}

    def __setstate__(self, state):
        self.__init__(**state)

    @property
    def resolved_device(self) -> str:
        """'cpu' or 'gpu': ``device`` resolved on first use in this process."""
        if self._resolved is None:
            self._resolved = _resolve(self.device)
        return self._resolved

    def setup(self, worker=None):
        _agree_with_numba()
        self._resolved = _resolve(self.device)
        if self.numba_threads:
            _cap_numba_threads(self.numba_threads)

    def teardown(self, worker=None):
        self._resolved = None
        for hook in _TEARDOWN_HOOKS:
            hook()


# the settings of a process that is not a Dask worker (a job on the local threaded scheduler)
_THIS_PROCESS = GraphjobsWorker()
_TEARDOWN_HOOKS: list[Callable[[], None]] = []


def on_teardown(hook: Callable[[], None]) -> None:
    """Call ``hook()`` when the plugin is torn down in this process (per-process caches register here)."""
    if hook not in _TEARDOWN_HOOKS:
        _TEARDOWN_HOOKS.append(hook)


def worker_plugin() -> GraphjobsWorker:
    """The plugin of the Dask worker running this task; outside a worker, this process's settings."""
    try:
        from distributed import get_worker

        plugin = get_worker().plugins.get(GraphjobsWorker.name)
    except ValueError:  # not in a worker
        return _THIS_PROCESS
    return plugin if isinstance(plugin, GraphjobsWorker) else _THIS_PROCESS


def worker_device() -> str:
    """The device tasks in this process should use: the plugin's, else 'gpu' if one is usable.
    Called from a task, it also caps the calling thread's Numba threads as the plugin was asked to."""
    plugin = worker_plugin()
    if plugin.numba_threads:
        _cap_numba_threads(plugin.numba_threads)
    return plugin.resolved_device


def set_worker_device(device: str | None) -> None:
    """Pin the device of this process's jobs when it is not a Dask worker; None restores 'auto'."""
    _THIS_PROCESS.device = device or "auto"
    _THIS_PROCESS._resolved = None if device is None else _resolve(device)


def _agree_with_numba() -> None:
    """Make NUMBA_NUM_THREADS in this process's environment the count Numba runs with. A script that
    imports graphjobs at its top is imported again by each spawned worker, Numba with it, before the
    nanny sets the environment; Numba then refuses, at its next compilation, a count that differs from
    the one its threads started with. Task threads are still capped through ``worker_device``."""
    numba = sys.modules.get("numba")
    if numba is not None:
        os.environ["NUMBA_NUM_THREADS"] = str(numba.config.NUMBA_NUM_THREADS)


def _resolve(device: str) -> str:
    from graphs._device import resolve_device

    return resolve_device(device)


def _cap_numba_threads(n: int) -> None:
    """Numba's thread count is a per-thread setting, which new threads take from NUMBA_NUM_THREADS."""
    import numba

    if numba.get_num_threads() > n:
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
