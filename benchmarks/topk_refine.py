"""Top-k PPR: the answer refined at the k-th value (``topk_ppr(refine=True)``, the default) against
Algorithm 3's own (``refine=False``, the baseline), on the same index and sources in the same run:
precision@k over many sources (mean and two standard errors; exact PPR by batched power iteration),
latency one query at a time, batch queries/s over sources with out-edges and uniformly random ones."""

from __future__ import annotations

import time

import numpy as np

import graphs
from graphs._device import to_host
from operators import build_ppr_index, ppr, topk_ppr
from operators.ppr.metrics import precision_at_k

from .common import Reporter
from .topk_ppr import _sources, _sync, snap_graphs, warm_up

EXACT_SOURCES = {"rmat-22": 96, "rmat-24": 48}  # the others: 32
EXACT_BLOCK = 16  # sources per exact PPR solve


def _exact(g, srcs):
    out = []
    for i in range(0, len(srcs), EXACT_BLOCK):
        out.append(to_host(ppr(g, srcs[i : i + EXACT_BLOCK], method="power", tol=1e-9)))
    return np.concatenate(out)


def _rate(idx, sources, k, refine, device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    topk_ppr(idx, sources, k=k, refine=refine)
    _sync(device)
    return len(sources) / (time.perf_counter() - t0)


def run_graph(rep: Reporter, name: str, g, batch: int) -> None:
    device = g.device
    srcs = _sources(g, EXACT_SOURCES.get(name, 32), seed=1)
    t0 = time.perf_counter()
    exact = _exact(g, srcs)
    exact_s = time.perf_counter() - t0
    g.forget_derived()
    _sync(device)
    t0 = time.perf_counter()
    idx = build_ppr_index(g, seed=0)
    _sync(device)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    topk_ppr(idx, srcs[:1], k=10)  # builds the in-edge lists (kept with the graph)
    _sync(device)
    first = time.perf_counter() - t0
    many = _sources(g, batch, seed=2)
    uniform = np.random.default_rng(3).choice(g.n, size=min(batch, g.n), replace=False)
    uniform = uniform if g.ids is None else to_host(g.ids)[uniform]
    common = dict(
        graph=name,
        n=g.n,
        m=g.m,
        index_s=build,
        index_mb=idx.nbytes / 2**20,
        walks=idx.walks,
        first_call_s=first,
        exact_s=exact_s,
    )
    for k in (10, 100, 1000):
        got = {}
        for refine in (False, True, True, False):  # latency in both orders; the second of each counts
            topk_ppr(idx, srcs[:2], k=k, refine=refine)
            res = topk_ppr(idx, srcs, k=k, streams=1, refine=refine)
            ids = [g.internal_ids(res.row(i)[0]) for i in range(len(srcs))]
            prec = np.array([precision_at_k(exact[i], ids[i], k) for i in range(len(srcs))])
            err = [np.abs(res.ppr[i] / np.maximum(exact[i][v], 1e-300) - 1).mean() for i, v in enumerate(ids)]
            got[refine] = dict(
                median=float(np.median(res.seconds * 1e3)),
                mean_ms=float(res.seconds.mean() * 1e3),
                precision=float(prec.mean()),
                precision_2se=float(2 * prec.std(ddof=1) / np.sqrt(prec.size)),
                at_least_099=float((prec >= 0.99).mean()),
                rel_err=float(np.mean(err)),
                refined=float(res.refined.mean()),
                rounds=float(res.rounds.mean()),
            )
        for refine in (False, True, True, False):
            got[refine]["batch_queries_per_s"] = _rate(idx, many, k, refine, device)
        for refine in (False, True, True, False):
            got[refine]["uniform_queries_per_s"] = _rate(idx, uniform, k, refine, device)
        base = {"impl": f"kpar k={k} {device}, refine=False (Algorithm 3)", **got[False]}
        rep.emit(
            bench="topk-refine",
            impl=f"kpar k={k} {device}, refine=True",
            unit="ms",
            **common,
            k=k,
            queries=len(srcs),
            batch_queries=len(many),
            **got[True],
            baseline=base,
            speedup=base["median"] / got[True]["median"],
        )
    idx.forget_workspaces()


def run(rep: Reporter, device: str, dataset_dir, scales, batch: int) -> None:
    warm_up(device)
    for name, g in snap_graphs(dataset_dir, device):
        run_graph(rep, name, g, batch)
    for s in scales:
        run_graph(rep, f"rmat-{s}", graphs.rmat(s, seed=0, device=device), batch)
