"""Memory of each job: the job's own estimate (its summary's ``memory``) beside the peak it allocated,
measured (on the GPU the device's; with ``--device cpu`` the host's).

Each (graph, job) runs in a fresh process (``--child``), so that nothing one job left in CuPy's pool
or in the process's caches counts for the next. The peak is the most bytes CuPy's default pool had
handed out at once (every device allocation of graphjobs goes through CuPy's allocator, wrapped here),
from before the job read its graph until it returned; ``pool_bytes`` is what the pool held from the
device at the end (the peak plus what the pool's rounding and fragmentation cost). On the CPU the peak
is the process's largest resident set less its resident set before the job (after the imports): it
includes the Python objects, Numba's compilation and whatever the job reads, not only its arrays.

    python -m benchmarks.memory --out memory.jsonl --scales 20,22
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.common import commit, device_name, peak_resident_bytes

JOBS = ("pagerank", "index", "topk-ppr", "ppr", "influence", "simrank")


def job_args(job: str, scale: int, folder: str, device: str = "gpu") -> list[str]:
    """The command line of ``job`` on R-MAT ``scale``; the index the top-k job queries is built first
    (by the parent, in its own process) in ``folder/index``."""
    spec, sources = f"rmat:{scale}", str(min(2000, 2**scale))
    common = ["--device", device, "--json"]
    work = ["--workdir", f"{folder}/wd"]
    out, index = f"{folder}/{job}.out", f"{folder}/index"
    return {
        "pagerank": ["pagerank", spec, "--out", out, *work],
        "index": ["index", spec, "--out", index],
        "topk-ppr": ["topk-ppr", "--index", index, "--random", sources, "-k", "100", "--out", out],
        "ppr": ["ppr", spec, "--random", "64", "-k", "100", "--out", out, *work],
        "influence": ["influence", spec, "-k", "50", "--out", out, *work],
        "simrank": ["simrank", spec, "--random", "2", "-k", "10", "--epsilon", "0.01", "--out", out, *work],
    }[job] + common


def child(args: list[str]) -> dict:
    """Run one job in this process under the peak tracker (a GPU job's): its summary and the peak."""
    from pipelines.cli import main

    gpu = args[args.index("--device") + 1] == "gpu"
    if gpu:
        import cupy as cp

        pool = cp.get_default_memory_pool()
        peak, climb = [0], []

        held = Held(cp)

        def malloc(size: int):
            held.attach()
            mem = pool.malloc(size)
            used = pool.used_bytes()
            if used > peak[0]:
                peak[0] = used
                if size >= 1 << 20:
                    climb.append((used, size, where()))
            return mem

        cp.cuda.set_allocator(malloc)
    rss_before = resident_bytes()
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(args)
    text = stdout.getvalue()
    try:
        summary = json.loads(text)
    except ValueError:
        summary = {"stdout": text[-2000:]}
    got = {"exit": code, "summary": summary}
    if not gpu:  # the process's resident peak (a CPU job's allocations do not pass one allocator)
        got["peak_bytes"] = max(0, peak_resident_bytes() - rss_before)
    if gpu:
        cp.cuda.Device().synchronize()
        got.update(peak_bytes=peak[0], pool_bytes=int(pool.total_bytes()))
        got["held"] = held.at_peak()
        got["climb"] = [
            {"used_mib": u / 2**20, "alloc_mib": a / 2**20, "at": w} for u, a, w in climb if u >= peak[0] / 3
        ][-12:]
    return got


class Held:
    """What was held at the peak, by where it was allocated: a CuPy memory hook (hooks are per thread:
    ``attach`` adds it to the calling thread) follows every block the pool hands out until it is freed,
    and keeps the sums by call site whenever the total held climbs 0.5% above the last kept one."""

    def __init__(self, cp) -> None:
        import threading

        outer = self
        self.live: dict = {}
        self.by_site: dict = {}
        self.total = self.kept_total = 0
        self.kept: dict = {}
        self.local = threading.local()
        self.lock = threading.Lock()

        class Hook(cp.cuda.MemoryHook):
            name = "graphjobs-held"

            def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
                outer.add(mem_ptr, mem_size)

            def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
                outer.drop(mem_ptr)

        self.hook = Hook()

    def attach(self) -> None:
        if not getattr(self.local, "on", False):
            self.hook.__enter__()
            self.local.on = True

    def add(self, ptr: int, size: int) -> None:
        site = where() if size >= 1 << 20 else "blocks under 1 MiB"
        with self.lock:
            self.live[ptr] = (size, site)
            self.by_site[site] = self.by_site.get(site, 0) + size
            self.total += size
            if self.total > self.kept_total * 1.005:
                self.kept, self.kept_total = dict(self.by_site), self.total

    def drop(self, ptr: int) -> None:
        with self.lock:
            size, site = self.live.pop(ptr, (0, None))
            if site is not None:
                self.by_site[site] -= size
                self.total -= size

    def at_peak(self) -> list:
        """The largest holders at the kept peak: [{"mib", "at"}], largest first, those over 1% of it."""
        rows = sorted(self.kept.items(), key=lambda item: -item[1])
        return [{"mib": b / 2**20, "at": s} for s, b in rows if b > 0.01 * self.kept_total]


def resident_bytes() -> int:
    """This process's resident set now (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def where() -> str:
    """The innermost graphjobs frames of the current stack: where an allocation was asked for."""
    frames = [
        f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno} {f.name}"
        for f in traceback.extract_stack()[:-2]
        if any(f"/{p}/" in f.filename for p in ("graphs", "operators", "pipelines"))
    ]
    return " < ".join(reversed(frames[-4:]))


def run_one(args: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", "--child", json.dumps(args)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"exit": proc.returncode, "error": proc.stderr[-3000:]}
    return json.loads(lines[-1])


def estimate_of(summary: dict) -> dict | None:
    """The device estimate a job's summary states (``memory``), or None where it states none."""
    memory = summary.get("memory") if isinstance(summary, dict) else None
    return memory if isinstance(memory, dict) and memory.get("estimate_bytes") else None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="memory.jsonl")
    parser.add_argument("--scales", default="20,22", help="R-MAT scales (edge factor 16)")
    parser.add_argument("--jobs", default=",".join(JOBS))
    parser.add_argument(
        "--device", default="gpu", choices=("gpu", "cpu"), help="cpu: the peak is the resident set's growth"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    context = {"device": args.device, "device_name": device_name(args.device), "commit": commit()}
    jobs = [j for j in args.jobs.split(",") if j]
    for scale in (int(s) for s in args.scales.split(",")):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as folder:
            if "topk-ppr" in jobs and "index" not in jobs:
                run_one(job_args("index", scale, folder, args.device))
            for job in jobs:
                got = run_one(job_args(job, scale, folder, args.device))
                est = estimate_of(got.get("summary", {}))
                peak = got.get("peak_bytes")
                record = dict(
                    context,
                    time=time.strftime("%Y-%m-%dT%H:%M:%S"),
                    bench="memory",
                    graph=f"rmat-{scale}",
                    job=job,
                    exit=got.get("exit"),
                    peak_gib=peak / 2**30 if peak is not None else None,
                    pool_gib=got["pool_bytes"] / 2**30 if "pool_bytes" in got else None,
                    estimate_gib=est["estimate_bytes"] / 2**30 if est else None,
                    estimate_over_peak=est["estimate_bytes"] / peak if est and peak else None,
                    parts=est.get("parts") if est else None,
                    n=(got.get("summary") or {}).get("n") if isinstance(got.get("summary"), dict) else None,
                    error=got.get("error"),
                    climb=got.get("climb"),
                    held=got.get("held"),
                )
                with open(args.out, "a") as f:
                    f.write(json.dumps(record) + "\n")
                print(
                    f"memory {record['graph']:<8} {job:<10} exit {record['exit']}"
                    f"  peak {fmt(record['peak_gib'])}"
                    f"  pool {fmt(record['pool_gib'])}  estimate {fmt(record['estimate_gib'])} GiB",
                    flush=True,
                )
                for row in (record["held"] or [])[:6]:
                    print(f"    held at the peak {row['mib']:10.1f} MiB  {row['at']}", flush=True)


def fmt(gib: float | None) -> str:
    return "-" if gib is None else f"{gib:.3f}"


if __name__ == "__main__":
    main()
