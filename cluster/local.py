"""Starting or joining a Dask cluster: LocalCUDACluster with GPUs, LocalCluster without."""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import inspect
import os
import sys

from .worker import GraphjobsWorker


def _cuda_cluster_available() -> bool:
    return gpu_count() > 0 and importlib.util.find_spec("dask_cuda") is not None


def gpu_count() -> int:
    from graphs._device import gpu_count as count  # not at import: see cluster.worker

    return count()


def make_cluster(
    n_workers: int | None = None, *, device: str = "auto", threads_per_worker: int | None = None, **kw
):
    """A local Dask cluster for graphjobs.

    Parameters
    ----------
    n_workers : int, optional
        GPU: one worker per visible GPU by default. CPU: ``max(1, min(4, cores // 2))``.
    device : {'auto', 'cpu', 'gpu'}
        'auto' picks a ``dask_cuda.LocalCUDACluster`` when GPUs and dask-cuda are present,
        otherwise a ``distributed.LocalCluster`` of processes.
    threads_per_worker : int, optional
        Dask task threads per worker (default 1: each task already runs Numba or GPU kernels in
        parallel; Numba gets ``cores // n_workers`` threads per worker).
    **kw
        Passed on to the cluster class (e.g. ``memory_limit``, ``protocol='ucx'``). By default the
        scheduler and the dashboard listen on 127.0.0.1 only (``host``, ``dashboard_address`` open them);
        ``security`` (a ``distributed.security.Security``) switches the cluster to TLS.

    Returns
    -------
    distributed.deploy.Cluster
        Its ``dashboard_link`` is printed (to standard error).

    Raises
    ------
    graphs.errors.OptionError
        A bad ``device``, ``n_workers`` or ``threads_per_worker``.
    graphs.errors.DeviceError
        ``device='gpu'`` without a visible GPU, CuPy and dask-cuda.
    """
    from graphs.errors import DeviceError, OptionError  # not at import: see cluster.worker

    if device not in ("auto", "cpu", "gpu"):
        raise OptionError(f"device must be 'auto', 'cpu' or 'gpu', got {device!r}")
    for name, value in (("n_workers", n_workers), ("threads_per_worker", threads_per_worker)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise OptionError(f"{name} must be an integer >= 1 (or None for the default), got {value!r}")
    use_gpu = device == "gpu" or (device == "auto" and _cuda_cluster_available())
    threads = threads_per_worker or 1
    cores = os.cpu_count() or 1
    kw.setdefault("host", "127.0.0.1")
    kw.setdefault("dashboard_address", "127.0.0.1:8787")
    if kw.get("security") is not None and kw["security"].require_encryption:
        kw.setdefault("protocol", "tls://")
    if use_gpu and not _cuda_cluster_available():
        raise DeviceError(
            "device='gpu' needs a visible GPU, CuPy and dask-cuda (pip install 'graphjobs[gpu]')"
        )
    _check_options(kw, use_gpu)
    if use_gpu:
        from dask_cuda import LocalCUDACluster

        workers = n_workers or gpu_count()
        plugin = GraphjobsWorker("gpu", numba_threads=max(1, cores // workers))
        cluster = LocalCUDACluster(n_workers=n_workers, threads_per_worker=threads, plugins={plugin}, **kw)
    else:
        from distributed import LocalCluster

        workers = n_workers or max(1, min(4, cores // 2))
        numba_threads = max(1, cores // workers)
        plugin = GraphjobsWorker("cpu", numba_threads=numba_threads)
        # Numba's thread count is per thread: set where the plugin runs, it would not reach the task
        # threads, which take the process's count (NUMBA_NUM_THREADS, read when Numba is imported)
        env = {"NUMBA_NUM_THREADS": str(numba_threads), **kw.pop("env", {})}
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=threads, processes=True, plugins={plugin}, env=env, **kw
        )
    print(f"graphjobs: Dask dashboard at {cluster.dashboard_link}", file=sys.stderr, flush=True)
    return cluster


def _check_options(kw: dict, use_gpu: bool) -> None:
    """Refuse an option that neither the cluster class nor its nannies, workers or their servers take:
    passed on, it fails only inside each worker process ("Nanny failed to start", the cause in a log)."""
    from distributed import LocalCluster, Nanny, Worker
    from distributed.core import Server

    classes = [LocalCluster, Nanny, Worker, Server]
    if use_gpu:
        from dask_cuda import LocalCUDACluster

        classes.insert(0, LocalCUDACluster)
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    known = {
        p.name
        for c in classes
        for p in inspect.signature(c.__init__).parameters.values()
        if p.kind in named and p.name != "self"
    }
    for name in sorted(set(kw) - known):
        near = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        owner = classes[0].__name__
        raise TypeError(
            f"make_cluster got an unknown option {name!r} (an option of neither {owner} nor its"
            f" workers){hint}"
        )


def _restoring_scheduler(make):
    """``make()``, undoing what a ``distributed.Client`` that fails to connect leaves behind if it raises:
    it has already made itself dask's default scheduler (cleared only by ``close``), and with some
    failures (a malformed address) it stays registered as the global client, not closed. Either way every
    later dask computation in the process would fail with "no Client active", or wait on it forever."""
    import dask
    from distributed import client as dclient

    conf = dask.config.config
    had, old = "scheduler" in conf, conf.get("scheduler")
    registry = getattr(dclient, "_global_clients", {})  # distributed's own registry (private)
    known = set(registry)
    try:
        return make()
    except BaseException:
        for key in set(registry) - known:
            stale = registry.pop(key, None)
            with contextlib.suppress(Exception):
                stale.close(timeout=1)
        if had:
            conf["scheduler"] = old
        else:
            conf.pop("scheduler", None)
        raise


def connect(address: str | None = None, *, security=None, timeout: float | None = None, **kw):
    """A ``distributed.Client``: to the scheduler at ``address``, or to a fresh ``make_cluster(**kw)``.

    Workers of an existing scheduler get the graphjobs worker plugin (device 'auto'). ``security``
    (``distributed.security.Security``) is used for the connection, or for the new cluster. ``timeout``:
    seconds to wait for the scheduler at ``address`` to answer (default: dask's
    ``distributed.comm.timeouts.connect``, 30 s unless configured).

    Raises ``graphs.errors.OptionError`` for bad options or a malformed address, and
    ``graphs.errors.SchedulerUnreachableError`` (an OSError) when nothing answers at ``address``.
    """
    from distributed import Client

    from graphs.errors import OptionError, SchedulerUnreachableError  # not at import: see cluster.worker

    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise OptionError(
            f"timeout must be a number of seconds > 0 (or None for dask's default), got {timeout!r}"
        )
    if address:
        if kw:
            raise OptionError(f"cluster options {sorted(kw)} apply only without a scheduler address")
        try:
            wait = {} if timeout is None else {"timeout": timeout}  # Client(timeout=None) would wait forever
            client = _restoring_scheduler(lambda: Client(address, security=security, **wait))
        except ValueError as exc:  # e.g. "invalid literal for int() with base 10: '8786x'"
            raise OptionError(
                f"scheduler address {address!r}: {exc} (expected HOST:PORT or"
                " PROTOCOL://HOST:PORT, e.g. tcp://10.0.0.5:8786)"
            ) from exc
        except OSError as exc:
            raise SchedulerUnreachableError(
                f"no Dask scheduler answered at {address!r} ({exc}); is one running there, e.g. started by "
                "`graphjobs cluster`?"
            ) from exc
        client.register_plugin(GraphjobsWorker("auto"))
        print(
            f"graphjobs: connected to {address}; dashboard at {client.dashboard_link}",
            file=sys.stderr,
            flush=True,
        )
        return client
    if timeout is not None:
        raise OptionError("timeout applies only with a scheduler address")
    cluster = make_cluster(security=security, **kw)
    try:
        return _restoring_scheduler(lambda: Client(cluster, security=security))
    except BaseException:  # its worker processes would outlive the error
        cluster.close()
        raise
