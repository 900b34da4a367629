"""Where arrays live: lazy CuPy import, device names, moves between host and GPU.

Every package of graphjobs goes through these helpers, so CuPy is imported only when a GPU
array or ``device='gpu'`` is actually used, and a missing CuPy gives one clear error.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from typing import Any

import numpy as np

from .errors import DeviceError, MissingDependencyError, OptionError

DEVICES = ("cpu", "gpu")
_GPU_HINT = "install the GPU extra: pip install 'graphjobs[gpu]' (CuPy for your CUDA version)"


@functools.cache
def _cupy_module() -> Any | None:
    try:
        return importlib.import_module("cupy")
    except ImportError:
        return None


def import_cupy() -> Any:
    """Return the ``cupy`` module or raise ``MissingDependencyError`` (an ImportError) that says how to
    get it."""
    cp = _cupy_module()
    if cp is None:
        raise MissingDependencyError(f"this GPU code path needs CuPy, which is not installed; {_GPU_HINT}")
    return cp


@functools.cache
def gpu_count() -> int:
    """Number of CUDA devices CuPy can see (0 without CuPy or a driver)."""
    cp = _cupy_module()
    if cp is None:
        return 0
    try:
        return int(cp.cuda.runtime.getDeviceCount())
    except Exception:  # no driver, no device, or a broken CUDA install: treat as no GPU
        return 0


def gpu_available() -> bool:
    return gpu_count() > 0


def is_gpu_array(a: Any) -> bool:
    return type(a).__module__.split(".", 1)[0] == "cupy"


def array_module(a: Any) -> Any:
    """``cupy`` for CuPy arrays, ``numpy`` for everything else (like ``cupy.get_array_module``)."""
    return import_cupy() if is_gpu_array(a) else np


def device_of(a: Any) -> str:
    return "gpu" if is_gpu_array(a) else "cpu"


def resolve_device(device: str | None) -> str:
    """Turn ``'auto'``/None into ``'gpu'`` when one is usable, else ``'cpu'``; check the name.

    Raises ``OptionError`` for an unknown name, ``MissingDependencyError`` (with the install hint) for
    ``'gpu'`` without CuPy, and ``DeviceError`` for ``'gpu'`` where CuPy sees no device.
    """
    if device in (None, "auto"):
        return "gpu" if gpu_available() else "cpu"
    if device not in DEVICES:
        raise OptionError(f"device must be 'cpu', 'gpu' or 'auto', got {device!r}")
    if device == "gpu" and not gpu_available():
        import_cupy()  # raises the install hint when CuPy is missing
        raise DeviceError("device='gpu' was requested but CuPy sees no CUDA device")
    return device


def free_memory(device: str) -> int:
    """Bytes free to allocate on ``device``: the GPU's free memory plus CuPy's unused pool, or the host's
    available memory; ``$GRAPHJOBS_MEMORY_LIMIT`` (bytes, or with a K/M/G/T suffix) caps it."""
    if device == "gpu":
        cp = import_cupy()
        free = int(cp.cuda.runtime.memGetInfo()[0]) + int(cp.get_default_memory_pool().free_bytes())
    else:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit = os.environ.get("GRAPHJOBS_MEMORY_LIMIT", "").strip().upper()
    if limit:
        scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}.get(limit[-1:], 1)
        try:
            cap = int(float(limit.rstrip("KMGTB") if scale > 1 else limit) * scale)
        except ValueError:
            raise OptionError(f"GRAPHJOBS_MEMORY_LIMIT={limit!r}: expected bytes, e.g. 2e9 or 2G") from None
        free = min(free, cap)
    return free


def to_device(a: Any, device: str) -> Any:
    """Move one array (or None) to ``device`` without copying when it is already there."""
    if a is None:
        return None
    if device == "gpu":
        return import_cupy().asarray(a)
    return a.get() if is_gpu_array(a) else np.asarray(a)


def to_host(a: Any) -> Any:
    return to_device(a, "cpu")


@functools.cache
def get_kernel(
    source: str, name: str, options: tuple[str, ...] = ("-std=c++17",), cooperative: bool = False
) -> Any:
    """The compiled CuPy RawKernel ``name`` of ``source``: built once per process and device;
    ``cooperative`` launches it with cuLaunchCooperativeKernel (grid-wide barriers allowed).

    CuPy compiles lazily on first launch for each device and caches the binary on disk, so one
    RawKernel object per (source, name) is all the memoization needed.
    """
    cp = import_cupy()
    return cp.RawKernel(source, name, options=options, enable_cooperative_groups=cooperative)


L2_FETCH_LIMIT = 0x05  # cudaLimitMaxL2FetchGranularity


@contextlib.contextmanager
def l2_fetch_granularity(nbytes: int):
    """Inside the block, the current GPU fetches ``nbytes`` from memory per L2 miss (a hint to the
    driver, 64 bytes by default on an H100), then the value it had: for kernels whose reads are
    scattered 8- or 16-byte records. The limit is the whole process's on that GPU, so the work of
    other threads meanwhile runs under it too (only its speed can change)."""
    runtime = import_cupy().cuda.runtime
    before = runtime.deviceGetLimit(L2_FETCH_LIMIT)
    if before != nbytes:
        runtime.deviceSetLimit(L2_FETCH_LIMIT, nbytes)
    try:
        yield
    finally:
        if before != nbytes:
            runtime.deviceSetLimit(L2_FETCH_LIMIT, before)


def resident_blocks(kernel: Any, threads: int) -> int | None:
    """Blocks of ``threads`` threads of RawKernel ``kernel`` resident at once on the whole GPU (what a
    cooperative grid may hold), or None when this CuPy has no occupancy call. Asked once per kernel
    (``get_kernel`` makes one object per source and name), block size and device."""
    return _resident(kernel, threads, import_cupy().cuda.Device().id)


@functools.cache
def _resident(kernel: Any, threads: int, device: int) -> int | None:
    cp = import_cupy()
    cp.cuda.runtime.setDevice(device)  # a thread that has run no CUDA work yet has no current context
    sms = int(cp.cuda.Device(device).attributes["MultiProcessorCount"])
    try:
        return sms * cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, 0)
    except AttributeError:
        return None


def event_seconds(fn, *, repeats: int, warmup: int) -> list[float]:
    """Seconds of each of ``repeats`` runs of ``fn`` on the current stream, timed with CUDA events."""
    cp = import_cupy()
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return times


def launch_config(n_items: int, threads: int = 256, max_blocks: int = 65535 * 32) -> tuple[tuple, tuple]:
    """Grid and block tuples for a 1-D launch over ``n_items`` (at least one block)."""
    blocks = max(1, min(max_blocks, (int(n_items) + threads - 1) // threads))
    return (blocks,), (threads,)
