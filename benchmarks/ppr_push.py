"""Single-source PPR: push, pull and the hybrid per source, beside power iteration in the same run.

Per graph and tolerance: median milliseconds per source over a fixed set of random sources (vertices
with out-edges, seed 1), mean iterations, the model sequence of the first source, the residue left,
and the L1 error against a 1e-10 power-iteration solution. Baseline: power iteration
(``operators.ppr(method='power')``: cuSPARSE SpMM on the GPU) to an L1 change of ``tol``, per source.
Matched baseline (``matched``): the cheapest power-iteration run whose measured L1 error on the
same sources is at most the method's worst measured error l1. Tried in order: on the GPU exactly 1
to 8 iterations (``max_iter=k``: the GPU checks its stop rule only every 8 iterations or at
``max_iter``), then stops at an L1 change of 64, 16, 4 and 1 times l1 (1 - alpha) / alpha; the last
always qualifies (after a change of d the error is at most d alpha / (1 - alpha)). Its measured
error is recorded too. Peer (GPU, where pylibcugraph is installed): cuGraph's personalized PageRank
per source to an L1 change of 1e-6, and, on the hybrid's rows, to an L1 change of l1 (1 - alpha) /
alpha, which bounds its error by the hybrid's.

Batches (GPU, ``bench='ppr-batch'``): sources per second over a fixed set of random sources when
``operators.ppr`` solves ``block`` of them at once in one residue matrix, beside the same run's one
source at a time (``block=1``) and power iteration's batched SpMM; with the worst L1 error of the
batch's first rows against the exact solution.
"""

from __future__ import annotations

import time

import numpy as np

import graphs
from graphs._device import to_host
from operators import ppr
from operators.ppr.cost import cost_model

from . import cugraph_peer
from .common import Reporter, fresh, wall
from .topk_ppr import _sources, _sync

METHODS = ("push", "pull", "hybrid")
ALPHA = 0.8  # ppr's default, used throughout


def _per_source(g, srcs, **opts):
    info: dict = {}
    out = []
    for s in srcs:
        _sync(g.device)
        t0 = time.perf_counter()
        x = ppr(g, [s], info=info, **opts)
        _sync(g.device)
        out.append(time.perf_counter() - t0)
    return np.array(out) * 1e3, info, x


def _matched_power(g, srcs, exact, l1: float, alpha: float = ALPHA) -> dict:
    """Power iteration per source to the L1 error ``l1`` (not tighter): median ms and its own error."""

    def error(opts):
        return float(np.abs(to_host(ppr(g, srcs, method="power", **opts)) - exact).sum(axis=1).max())

    tries = [dict(tol=10.0, max_iter=k) for k in range(1, 9)] if g.device == "gpu" else []
    tries += [dict(tol=max(l1 * (1 - alpha) / alpha * 4.0**j, 1e-12)) for j in (3, 2, 1, 0)]
    for opts in tries:
        if (err := error(opts)) <= l1:
            break
    ms, _, _ = _per_source(g, srcs, method="power", **opts)
    return {"impl": f"power to the same L1 error {g.device}", "median": float(np.median(ms)), **opts,
            "l1_max": err}  # fmt: skip


def _peer_run(peer, g, srcs, exact, epsilon: float, alpha: float = ALPHA) -> dict:
    """cuGraph's PPR per source (median ms) to an L1 change of ``epsilon``, and its worst L1 error."""
    ids = [int(v) for v in g.internal_ids(srcs)]
    peer.ppr(ids[0], alpha=alpha, epsilon=epsilon)  # warm-up
    ms, err = [], 0.0
    for i, v in enumerate(ids):
        _sync("gpu")
        t0 = time.perf_counter()
        x = peer.ppr(v, alpha=alpha, epsilon=epsilon)
        _sync("gpu")
        ms.append((time.perf_counter() - t0) * 1e3)
        if i < len(exact):
            err = max(err, float(np.abs(to_host(x).astype(np.float64) - exact[i]).sum()))
    return {"impl": f"{cugraph_peer.NAME} epsilon={epsilon:.3g}", "median": float(np.median(ms)),
            "epsilon": epsilon, "l1_max": err}  # fmt: skip


def run_graph(rep: Reporter, name: str, g, tols, *, sources=20, exact_sources=3):
    device = g.device
    srcs = _sources(g, sources, seed=1)
    ppr(g, srcs[:1], method="power", tol=1e-3)  # builds the transposed matrix (not timed)
    exact = to_host(ppr(g, srcs[:exact_sources], method="power", tol=1e-10))
    common = dict(graph=name, n=g.n, m=g.m)
    peer = cugraph_peer.Peer(g) if device == "gpu" and cugraph_peer.available() else None
    if peer is not None:
        run = _peer_run(peer, g, srcs, exact, 1e-6)
        rep.emit(bench="ppr", impl=run["impl"], median=run["median"], unit="ms", **common, tol=1e-6,
                 l1_max=run["l1_max"], sources=len(srcs), graph_build_s=peer.build_s)  # fmt: skip
    for tol in tols:
        base_ms, _, _ = _per_source(g, srcs[:exact_sources], method="power", tol=tol)
        base = {"impl": f"power tol={tol:g} {device}", "median": float(np.median(base_ms))}
        for method in METHODS:
            ppr(g, srcs[:1], method=method, tol=tol)  # compile, plan
            ms, info, _ = _per_source(g, srcs, method=method, tol=tol)
            approx = to_host(ppr(g, srcs[:exact_sources], method=method, tol=tol))
            l1 = np.abs(approx - exact).sum(axis=1)
            matched = _matched_power(g, srcs[:exact_sources], exact, float(l1.max()))
            models = info["models"]
            extra = {}
            if peer is not None and method == "hybrid":
                bound = float(l1.max()) * (1 - ALPHA) / ALPHA  # an L1 change that bounds its error by l1
                run = _peer_run(peer, g, srcs, exact, max(bound, 1e-7))
                extra = {"peer": run, "speedup_vs_peer": run["median"] / float(np.median(ms))}
            rep.emit(
                bench="ppr", impl=f"{method} tol={tol:g} {device}", median=float(np.median(ms)), unit="ms",
                **common, tol=tol, mean_ms=float(ms.mean()), iterations=float(np.mean(info["iterations"])),
                pulls=float(np.mean([m.count("L") for m in models])), models_first=models[0],
                residual_max=float(np.max(info["residual"])), l1_max=float(l1.max()), sources=len(srcs),
                baseline=base, speedup=base["median"] / float(np.median(ms)), matched=matched,
                speedup_matched=matched["median"] / float(np.median(ms)), **extra,
            )  # fmt: skip


BLOCKS = (1, 4, 16, 64, 128)
POWER = "power batched SpMM gpu"


def _batch_rate(g, srcs, **opts) -> float:
    """Sources per second of one call over all of ``srcs`` (best of two)."""
    _, times = wall(lambda: ppr(g, srcs, **opts), repeats=2, warmup=0, sync=lambda: _sync(g.device))
    return len(srcs) / min(times)


def run_batches(rep: Reporter, name: str, g, *, sources: int, tol: float = 1e-6, exact_sources=3):
    """Throughput of batches of sources against one at a time, per method and block size."""
    import cupy as cp

    from operators.ppr.push_plan import ITEM_BYTES, batch_size, row_stride

    cp.get_default_memory_pool().free_all_blocks()
    srcs = _sources(g, sources, seed=2)
    exact = to_host(ppr(g, srcs[:exact_sources], method="power", tol=1e-10))
    power = _batch_rate(g, srcs, method="power", tol=tol)
    model = cost_model("gpu")
    default = batch_size(g.n, np.float64, model)
    common = dict(graph=name, n=g.n, m=g.m, tol=tol, sources=len(srcs), default_block=default)
    for method in METHODS:
        single = None
        for block in sorted({b for b in BLOCKS if b <= len(srcs)} | {min(default, len(srcs))}):
            free = cp.cuda.Device().mem_info[0] + cp.get_default_memory_pool().free_bytes()
            if block * row_stride(g.n, model) * ITEM_BYTES[np.float64] > free // 3:
                continue
            ppr(g, srcs[:block], method=method, tol=tol, block=block)  # compile and warm the pool
            rate = _batch_rate(g, srcs, method=method, tol=tol, block=block)
            single = single or rate
            info: dict = {}
            x = to_host(ppr(g, srcs[: max(block, exact_sources)], method=method, tol=tol, block=block,
                            info=info)[:exact_sources])  # fmt: skip
            l1 = np.abs(x - exact[: len(x)]).sum(axis=1)
            rep.emit(bench="ppr-batch", impl=f"{method} block={block} gpu", median=rate, unit="sources/s",
                     **common, block=block, iterations=info["iterations"][0], models=info["models"][0],
                     l1_max=float(l1.max()), baseline={"impl": f"{method} block=1 gpu", "median": single},
                     speedup=rate / single, power={"impl": POWER, "median": power})  # fmt: skip
    ppr(g, srcs[:default], tol=tol, topk=100)  # warm-up: the top-k kernels compile per shape
    rate = _batch_rate(g, srcs, tol=tol, topk=100)
    rep.emit(bench="ppr-batch", impl=f"hybrid block={default} topk=100 gpu", median=rate, unit="sources/s",
             **common, block=default, baseline={"impl": POWER, "median": power})  # fmt: skip


def run_job(rep: Reporter, name: str, source, *, sources: int = 10_000, workdir: str = "/tmp/gj-ppr-job"):
    """The PPR job (k=100, chunks of 500 sources) on one GPU worker: default batches against one
    source at a time (``block=1``), same cluster, graph loaded once per worker before timing."""
    from distributed import Client

    import pipelines
    from cluster import make_cluster

    rates = {}
    with make_cluster(1, device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
        for block in (None, 1):
            tag = "default" if block is None else block
            same = dict(chunk=500, block=block, workdir=workdir, overwrite=True)
            warm = pipelines.ppr_job(source, pipelines.RandomSources(500), seed=100,
                                     out=fresh(f"{workdir}/warm-{name}-{tag}"), **same)  # fmt: skip
            pipelines.run(warm, client, progress=False)
            job = pipelines.ppr_job(source, pipelines.RandomSources(sources), seed=7,
                                    out=fresh(f"{workdir}/batch-{name}-{tag}"), **same)  # fmt: skip
            t0 = time.perf_counter()
            summary = pipelines.run(job, client, progress=False)
            rates[tag] = summary["queries"] / (time.perf_counter() - t0)
    rep.emit(bench="ppr-job", graph=name, impl="ppr job, 1 GPU worker, batches", median=rates["default"],
             unit="queries/s", queries=sources, topk=100, tol=1e-6,
             baseline={"impl": "same job, block=1", "median": rates[1]},
             speedup=rates["default"] / rates[1])  # fmt: skip


def run(rep: Reporter, device: str, dataset_dir, scales, *, batches_only: bool = False) -> None:
    t0 = time.perf_counter()
    model = cost_model(device)
    rep.emit(bench="ppr-cost", impl=f"cost model {device}", median=time.perf_counter() - t0, unit="s",
             l1=model.l1, l2=model.l2, l3=model.l3, blocks=model.blocks)  # fmt: skip
    warm = graphs.rmat(10, seed=1, device=device)
    for method in METHODS:
        ppr(warm, _sources(warm, 2, 0), method=method)
    for name in ("wiki-Vote", "soc-Epinions1", "soc-Slashdot0902"):
        path = None if dataset_dir is None else dataset_dir / f"{name}.txt.gz"
        if path is not None and path.is_file():
            g = graphs.read_edgelist(path).to(device)
            if not batches_only:
                run_graph(rep, name, g, (1e-6, 1e-8))
            if device == "gpu":
                run_batches(rep, name, g, sources=256)
    for s in scales:
        g = graphs.rmat(s, seed=0, device=device)
        if not batches_only:
            tols = (1e-6, 1e-7, 1e-8) + ((1e-9, 1e-10) if device == "gpu" else ())  # dense iterations
            run_graph(rep, f"rmat-{s}", g, tols, sources=10)
        if device == "gpu":
            run_batches(rep, f"rmat-{s}", g, sources=64 if s < 24 else 32)
