"""Top-k PPR (kPAR) ablation: latency and precision@k as the paper's switches are turned on one by one
(kPAR_I, kPAR_IP1, kPAR_IP, kPAR; then graphjobs' persistent push, delta jumps and refinement), on one
index and one set of sources per graph; the baseline is the first setting (IRW only) in the same run.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import graphs
from graphs._device import to_host
from operators import TopkTuning, build_ppr_index, ppr, topk_ppr
from operators.ppr.metrics import precision_at_k

from .common import Reporter
from .topk_ppr import _sources

# The query's switches, from the simplest to full kPAR (the paper's schedule: a launch per frontier,
# delta halved once per round, no refinement), then graphjobs' three additions; tiling and the persistent
# push only change the GPU kernels
PAPER = dict(persistent=False, jump=False)
ABLATION = (  # (label, tuning, refine)
    ("IRW only", TopkTuning(adaptive=False, high_irw=False, tiling=False, **PAPER), False),
    ("+ adaptive push", TopkTuning(adaptive=True, high_irw=False, tiling=False, **PAPER), False),
    ("+ high-IRW set", TopkTuning(adaptive=True, high_irw=True, tiling=False, **PAPER), False),
    ("+ tiling (full kPAR)", TopkTuning(adaptive=True, high_irw=True, tiling=True, **PAPER), False),
    ("+ persistent push", TopkTuning(persistent=True, jump=False), False),
    ("+ delta jumps", TopkTuning(), False),
    ("+ refinement (graphjobs' default)", TopkTuning(), True),
)
GPU_ONLY = ("+ tiling (full kPAR)", "+ persistent push")


def ablation(rep: Reporter, name: str, g, *, ks=(100, 1000), queries=10) -> None:
    """Latency and precision@k of each switch setting, on one index and one set of sources."""
    device = g.device
    idx = build_ppr_index(g, seed=0)
    srcs = _sources(g, queries, seed=1)
    exact = to_host(ppr(g, srcs, method="power", tol=1e-9))
    variants = [v for v in ABLATION if device == "gpu" or v[0] not in GPU_ONLY]
    for k in ks:
        base = None
        for label, tuning, refine in variants:
            switches = {**dataclasses.asdict(tuning), "refine": refine}
            topk_ppr(idx, srcs[:2], k=k, streams=1, tuning=tuning, refine=refine)  # warm-up (compilation)
            res = topk_ppr(idx, srcs, k=k, streams=1, tuning=tuning, refine=refine)
            ms = float(np.median(res.seconds)) * 1e3
            prec = [precision_at_k(exact[i], g.internal_ids(res.row(i)[0]), k) for i in range(len(srcs))]
            base = base or {"impl": f"kpar {ABLATION[0][0]} k={k} {device}", "median": ms}
            rep.emit(
                bench="topk-ablation",
                graph=name,
                impl=f"kpar {label} k={k} {device}",
                median=ms,
                unit="ms",
                n=g.n,
                m=g.m,
                k=k,
                switches=switches,
                precision=float(np.mean(prec)),
                queries=len(srcs),
                rounds=float(res.rounds.mean()),
                pushes=float(res.pushes.mean()),
                fallback=int(res.fallback.sum()),
                baseline=base,
                speedup=base["median"] / ms,
            )


def run_ablation(rep: Reporter, device: str, dataset_dir, scales) -> None:
    for name in ("soc-Slashdot0902", "soc-Epinions1"):
        path = None if dataset_dir is None else dataset_dir / f"{name}.txt.gz"
        if path is not None and path.is_file():
            ablation(rep, name, graphs.read_edgelist(path).to(device))
    for s in scales:
        ablation(rep, f"rmat-{s}", graphs.rmat(s, seed=0, device=device))
