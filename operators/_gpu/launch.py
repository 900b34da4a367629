"""Launch helpers: 1-D launch configurations, how many blocks of a kernel are resident at once, the L2
fetch granularity, and timing with CUDA events."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from graphs._device import import_cupy
from graphs._kernel import launch_config

__all__ = ["L2_FETCH_LIMIT", "event_seconds", "l2_fetch_granularity", "launch_config", "resident_blocks"]

L2_FETCH_LIMIT = 0x05  # cudaLimitMaxL2FetchGranularity


@contextlib.contextmanager
def l2_fetch_granularity(nbytes: int):
    """Inside the block, the current GPU fetches ``nbytes`` from memory per L2 miss (a hint to the
    driver), then the value it had: for kernels whose reads are scattered 8- or 16-byte records. The
    limit is the whole process's on that GPU, so the work of other threads meanwhile runs under it too
    (only its speed can change)."""
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
    (``Kernel.get`` makes one object per entry and variant), block size and device."""
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
