"""Timing and reporting helpers shared by the benchmark modules."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable


def commit() -> str:
    """The commit measured: $GRAPHJOBS_COMMIT (set it where the tree is a copy without git history,
    e.g. on the GPU machine), else git's HEAD."""
    if os.environ.get("GRAPHJOBS_COMMIT"):
        return os.environ["GRAPHJOBS_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def device_name(device: str) -> str:
    if device == "gpu":
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return f"{platform.processor() or platform.machine()} x{os.cpu_count()}"


def copy_rate(*, nbytes: int = 2**32, repeats: int = 20) -> float:
    """Bytes read + written per second by a device-to-device copy of ``nbytes`` on the current GPU,
    measured now with CUDA events (the median of ``repeats``): the yardstick a kernel's bandwidth
    fraction is stated against, taken on the machine that ran the kernel. ``nbytes`` is capped at a
    quarter of the free memory."""
    import cupy as cp

    free, _ = cp.cuda.runtime.memGetInfo()
    nbytes = max(2**20, min(nbytes, free // 4))

    def measure() -> float:
        src = cp.zeros(nbytes, dtype=cp.uint8)
        dst = cp.empty_like(src)
        return gpu_time(lambda: dst.__setitem__(Ellipsis, src), repeats=repeats, warmup=2)[0]

    try:
        seconds = measure()
    finally:
        cp.get_default_memory_pool().free_all_blocks()  # the two buffers, released when measure returned
    return 2 * nbytes / seconds


def wall(
    fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1, sync: Callable[[], None] | None = None
):
    """Median and all wall-clock seconds of ``fn`` (synchronising the device around each run)."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def peak_resident_bytes() -> int:
    """This process's largest resident set so far (``getrusage``; kilobytes on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def fresh(path: str) -> str:
    """``path`` with nothing left from an earlier run: a job's output folder resumes the chunks it already
    holds (and an index folder is reused), so a timed job that found them would time nothing."""
    shutil.rmtree(path, ignore_errors=True)
    return path


def gpu_time(fn: Callable[[], object], *, repeats: int = 20, warmup: int = 3):
    """Median seconds of ``fn`` measured with CUDA events."""
    from operators._gpu.launch import event_seconds

    times = event_seconds(fn, repeats=repeats, warmup=warmup)
    return statistics.median(times), times


class Reporter:
    """Writes one JSON line per measurement and keeps a short table for the end of the run."""

    def __init__(self, path: str, device: str):
        self.path = path
        self.device = device
        self.context = {"device": device, "device_name": device_name(device), "commit": commit()}
        self.rows: list[str] = []

    def emit(self, **record) -> None:
        record = {**self.context, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **record}
        with open(self.path, "a") as f:
            f.write(json.dumps(record, default=float) + "\n")
        base = record.get("baseline") or {}
        line = f"{record['bench']:<9} {record.get('graph', ''):<18} {record.get('impl', ''):<26} "
        line += f"{record['median']:>10.4g} {record.get('unit', '')}"
        if base:
            line += f"   vs {base['impl']} {base['median']:.4g} ({record.get('speedup', 0):.2f}x)"
        if "bandwidth_fraction" in record:
            line += f"   {100 * record['bandwidth_fraction']:.0f}% of copy bw"
        print(line, flush=True)
        self.rows.append(line)

    def summary(self) -> None:
        print("\n==== summary ====")
        print("\n".join(self.rows))
