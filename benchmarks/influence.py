"""Influence maximization (IMM, k = 50, WC weights): total, estimation, sampling and selection time, theta,
RR-set volume and the Monte Carlo spread of the seeds.

Graphs: soc-Epinions1 and soc-Slashdot0902 (when the datasets are present) and, on the GPU,
Barabasi-Albert graphs with n = 1e6 and r edges per vertex (gIM Fig. 7). Baseline in the same run: the
Numba CPU path of the same call on the same machine (SNAP graphs, where it finishes in minutes); it
draws the same RR samples, so it picks the same seeds. Time: median of ``repeats`` runs, wall clock,
after one untimed run of the same call (the block sampler of large RR samples is first used by some
graphs only, and its first launch in a fresh process stalled 4-12 s on the H100).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import graphs
from graphs._device import to_host
from operators import influence_maximization, influence_spread

from .common import Reporter


def _imm(g, repeats, **opts):
    influence_maximization(g, **opts)  # not timed: the first use of a kernel in a process may load it
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = influence_maximization(g, **opts)
        runs.append((time.perf_counter() - t0, res))
    runs.sort(key=lambda r: r[0])
    return statistics.median(t for t, _ in runs), runs[len(runs) // 2][1]


def run_graph(
    rep: Reporter,
    name: str,
    g,
    device: str,
    *,
    eps_list=(0.05, 0.1),
    models=("IC", "LT"),
    repeats=3,
    baseline=True,
    n_sim=10_000,
    k=50,
):
    gd = g.to(device)
    for model in models:
        for eps in eps_list:
            opts = dict(k=k, epsilon=eps, model=model, weights="wc", seed=1)
            secs, res = _imm(gd, repeats, **opts)
            spread = influence_spread(gd, res.seeds, model=model, n_sim=n_sim, seed=2)
            base = None
            if baseline and device == "gpu":
                bsecs, bres = _imm(g, 1, **opts)
                base = {
                    "impl": f"IMM numba cpu x{_cores()}",
                    "median": bsecs,
                    "same_seeds": bool((bres.seeds == res.seeds).all()),
                }
            rep.emit(
                bench="influence",
                graph=name,
                impl=f"IMM {model} eps={eps:g} {device}",
                median=secs,
                unit="s",
                n=g.n,
                m=g.m,
                k=k,
                model=model,
                epsilon=eps,
                **_found(res, spread),
                repeats=repeats,
                **({"baseline": base, "speedup": base["median"] / secs} if base else {}),
            )


def _found(res, spread) -> dict:
    """What an IMM row reports of its result: RR sample counts, the bounds, the RR estimate beside the
    Monte-Carlo ``spread`` of its seeds, the phases' seconds and the estimation phase's rounds."""
    return dict(
        theta=res.theta,
        rr_sets=res.rr_sets,
        rr_size=res.rr_size,
        lower_bound=res.lower_bound,
        estimate=res.spread,
        mc_spread=spread,
        phases=res.seconds,
        estimation=list(res.estimation),
    )


def _interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is, or was raised from, a KeyboardInterrupt (a Numba function interrupted by
    SIGINT raises SystemError from it)."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


def run(rep: Reporter, device: str, dataset_dir, ba_degrees, ba_n: int = 1_000_000) -> None:
    for name in ("soc-Epinions1", "soc-Slashdot0902"):
        path = None if dataset_dir is None else dataset_dir / f"{name}.txt.gz"
        if path is not None and path.is_file():
            run_graph(rep, name, graphs.read_edgelist(path), device)
    for r in ba_degrees:
        g = graphs.barabasi_albert(ba_n, r, seed=0)
        run_graph(
            rep,
            f"ba-{ba_n:g}-r{r}",
            g,
            device,
            eps_list=(0.1,) if r < 32 else (0.05, 0.1),
            baseline=False,
            repeats=2,
        )


def run_rmat(rep: Reporter, scales, *, k: int = 50, eps: float = 0.1, n_sim: int = 100) -> None:
    """IMM (IC, weighted cascade, k = 50, eps = 0.1) on R-MAT graphs generated on the GPU from seed 0: the
    GPU rows of every scale first (with ``n_sim`` forward simulations of the seeds and their standard
    error), then the Numba path of the same call on this machine's cores as their baseline, smallest
    scale first. Each GPU row times a second call on a new copy of the graph (the model is built again);
    the first, which also compiles kernels on a machine whose CuPy cache lacks them, is its
    ``first_call_s``. The baseline at these sizes can run for many minutes; interrupted (SIGINT, as
    ``gpu.sh``'s STEP_TIMEOUT sends), it is recorded as not finished after the seconds it ran, a lower
    bound on the speed-up."""
    import cupy as cp

    from operators.influence import gpu as _im_gpu
    from operators.influence.model import diffusion_model

    sync = cp.cuda.Device().synchronize
    opts = dict(k=k, epsilon=eps, model="IC", weights="wc", seed=1)
    small = graphs.rmat(16, seed=0)
    influence_maximization(small.to("gpu"), **opts)  # the GPU kernels' loading, not timed
    # samples beyond a warp's queue (p = 0.5 on R-MAT 16) load the block sampler too, not timed
    _im_gpu.sample(diffusion_model(small.to("gpu"), "IC", 0.5, 0).rev, False, 1, 2, 1, 0, 64)
    rows = {}
    for scale in scales:
        # a first call on this graph compiles (or loads from CuPy's disk cache) the kernel variants that
        # its sizes select, which the small graph above did not; timed apart as first_call_s. The timed
        # call runs on a new copy of the graph, so it builds the diffusion model again.
        gd = graphs.rmat(scale, device="gpu", seed=0)
        sync()
        t0 = time.perf_counter()
        influence_maximization(gd, **opts)
        first = time.perf_counter() - t0
        del gd
        gd = graphs.rmat(scale, device="gpu", seed=0)
        sync()  # the generator's kernels finish outside the timed call
        t0 = time.perf_counter()
        res = influence_maximization(gd, **opts)
        secs = time.perf_counter() - t0
        info: dict = {}
        spread = influence_spread(gd, res.seeds, model="IC", n_sim=n_sim, seed=2, info=info)
        row = dict(bench="influence", graph=f"rmat-{scale}", n=gd.n, m=gd.m, k=k, model="IC", epsilon=eps)
        row.update(unit="s", **_found(res, spread), mc_simulations=n_sim, mc_stderr=info["stderr"])
        row.update(first_call_s=first)
        rep.emit(**row, impl=f"IMM IC eps={eps:g} gpu", median=secs, repeats=1)
        rows[scale] = (row, secs, np.asarray(to_host(res.seeds)))
        del gd, res
    influence_maximization(small, **opts)  # Numba's compilation, not timed
    impl = f"IMM numba cpu x{_cores()}"
    for scale in scales:
        row, secs, seeds = rows[scale]
        g = graphs.rmat(scale, device="gpu", seed=0).to("cpu")
        t0 = time.perf_counter()
        try:
            bres = influence_maximization(g, **opts)
        except (KeyboardInterrupt, SystemError) as exc:
            if not _interrupted(exc):
                raise
            ran = time.perf_counter() - t0
            lower = dict(finished=False, ran_s=ran, gpu_s=secs, speedup_at_least=ran / secs)
            rep.emit(**row, impl=impl, median=float("nan"), **lower)
            raise
        base = time.perf_counter() - t0
        same = bool(np.array_equal(np.asarray(bres.seeds), seeds))
        rep.emit(
            **row, impl=impl, median=base, finished=True, gpu_s=secs, speedup=base / secs, same_seeds=same
        )
        del g, bres
