"""Where a single-source PPR query spends its time on the GPU: the public call, the solver's run
alone (wall clock and CUDA events), the set-up around it, and the Python profile of ``ppr``.

    python -m benchmarks.profile_ppr soc-Epinions1 rmat:22 --tols 1e-6,1e-8 --method hybrid

``--method power``: per call, the whole call beside each of its two PageRank-style phases (float32,
then float64): wall clock, iterations, iterations launched, and the set-up and loop times of each phase
from CUDA events; then the Python profile of ``ppr`` by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import pstats
import time

import numpy as np

import graphs
from benchmarks.run import dataset_dir
from benchmarks.topk_ppr import _sources
from operators import ppr
from operators.ppr import MODES
from operators.ppr.cost import cost_model
from operators.ppr.push_gpu import solver


def gpu_graph(name: str):
    """A SNAP graph from the datasets folder by name, or R-MAT (seed 0) by ``rmat:SCALE``, on the GPU."""
    if name.startswith("rmat:"):
        return graphs.rmat(int(name[5:]), seed=0, device="gpu")
    return graphs.read_edgelist(dataset_dir() / f"{name}.txt.gz").to("gpu")


def profile(name: str, tol: float, method: str, sources: int, blocks=None, quiet=False) -> None:
    import dataclasses

    import cupy as cp

    cost = cost_model("gpu")
    cost = dataclasses.replace(cost, blocks=blocks) if blocks else cost
    sync = cp.cuda.Device().synchronize
    g = gpu_graph(name)
    srcs = _sources(g, sources, seed=1)
    ppr(g, srcs[:2], tol=tol, method=method, cost=cost)  # compile, plan, cost model
    sync()
    t0 = time.perf_counter()
    for s in srcs:
        ppr(g, [s], tol=tol, method=method, cost=cost)
    sync()
    api = (time.perf_counter() - t0) / len(srcs) * 1e3
    run = solver(g, MODES[method], 0.8, tol, np.float64, cost)
    ids = [int(v) for v in g.internal_ids(srcs)]
    run([ids[0]], 10**6)
    sync()
    t0, iterations, kernel = time.perf_counter(), [], []
    for v in ids:
        iterations.append(run([v], 10**6)[1])
        kernel.append(run.last_kernel_ms)
    sync()
    solve = (time.perf_counter() - t0) / len(ids) * 1e3
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    _, _, models, _ = run([ids[1]], 10**6)
    stop.record()
    stop.synchronize()
    ev = cp.cuda.get_elapsed_time(start, stop)
    print(
        f"{name} tol={tol:g} {method} {cost.blocks} blocks: ppr() {api:.3f} ms per source, solver run "
        f"{solve:.3f} ms (events {ev:.3f} ms, solve kernel {np.median(kernel):.3f} ms), "
        f"{np.mean(iterations):.1f} iterations, models {models}"
    )
    if quiet:
        return
    prof = cProfile.Profile()
    prof.enable()
    for s in srcs[:10]:
        ppr(g, [s], tol=tol, method=method, cost=cost)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(12)


def profile_power(name: str, tol: float, sources: int, quiet=False) -> None:
    import cupy as cp

    pagerank_module = importlib.import_module("operators.pagerank.gpu")

    sync = cp.cuda.Device().synchronize
    g = gpu_graph(name)
    srcs = _sources(g, sources, seed=1)
    ppr(g, srcs[:1], tol=tol, method="power")  # compile, layouts
    phases: list = []
    inner = pagerank_module.pagerank_gpu

    def timed(G, **kw):
        t0 = time.perf_counter()
        out = inner(G, **kw)
        wall = time.perf_counter() - t0
        phases.append((np.dtype(kw["dtype"]).itemsize, kw["method"], out[1], wall, out[3]))
        return out

    pagerank_module.pagerank_gpu = timed
    try:
        for s in srcs:
            phases.clear()
            sync()
            t0 = time.perf_counter()
            ppr(g, [s], tol=tol, method="power")
            sync()
            total = (time.perf_counter() - t0) * 1e3
            parts = " | ".join(
                f"f{8 * size} {method} {it} it ({t['launched']} launched) {wall * 1e3:.3f} ms: set-up "
                f"{t['setup_s'] * 1e3:.3f}, loop {t['loop_s'] * 1e3:.3f}"
                for size, method, it, wall, t in phases
            )
            rest = total - sum(p[3] for p in phases) * 1e3
            print(f"{name} tol={tol:g} power: {total:.3f} ms = {parts} | outside the phases {rest:.3f}")
    finally:
        pagerank_module.pagerank_gpu = inner
    if quiet:
        return
    prof = cProfile.Profile()
    prof.enable()
    for s in srcs[:10]:
        ppr(g, [s], tol=tol, method="power")
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graphs", nargs="+", help="SNAP names (from the datasets folder) or rmat:SCALE")
    ap.add_argument("--tols", default="1e-6,1e-8")
    ap.add_argument("--method", default="hybrid", choices=["push", "pull", "hybrid", "power"])
    ap.add_argument("--sources", type=int, default=20)
    ap.add_argument("--blocks", default="", help="cost-model (and grid) blocks to try, e.g. 264,528")
    ap.add_argument("--quiet", action="store_true", help="no Python profile")
    args = ap.parse_args(argv)
    for name in args.graphs:
        for tol in (float(t) for t in args.tols.split(",")):
            if args.method == "power":
                profile_power(name, tol, args.sources, args.quiet)
                continue
            for blocks in [int(b) for b in args.blocks.split(",") if b] or [None]:
                profile(name, tol, args.method, args.sources, blocks, args.quiet)


if __name__ == "__main__":
    main()
