"""Where a top-k PPR query's time goes on the GPU: each step of a round, synchronised and timed.

python -m benchmarks.profile_topk [GRAPH.txt.gz | rmat:SCALE] ... [--k K] [--queries Q]

Prints, per graph, k and variant, the median and mean latency of plain queries, then the mean
milliseconds per query of each step with a device sync around it ("estimate" is a round's
``estimate_launch`` and ``estimate_finish``; "bound": the candidates and Alg. 4, and "compute": Alg. 6,
are kernels inside it, whose remainder is the round's top k and the host's share), and per
query the rounds, frontiers, pushes, edges pushed, touched vertices and candidates of the last round.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import cupy as cp
import numpy as np

import graphs
from benchmarks.topk_ppr import _sources
from operators import TopkTuning, build_ppr_index, topk_ppr
from operators.topk import gpu as tg
from operators.topk.gpu.bound import Candidates

METHODS = ("start", "push", "estimate_launch", "estimate_finish", "fallback")
STEPS = ("start", "push", "estimate", "fallback", "bound", "compute")
STEP_OF = {"estimate_launch": "estimate", "estimate_finish": "estimate"}  # a round's two halves
profiled = {}  # per workspace (by id): the last query's frontiers, edges pushed and touched vertices
VARIANTS = (("graphjobs", {}), ("paper schedule", dict(tuning=TopkTuning(persistent=False, jump=False))))


def _timed(totals, name, fn):
    def wrapper(*a, **kw):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = fn(*a, **kw)
        cp.cuda.Device().synchronize()
        totals[name] += time.perf_counter() - t0
        return out

    return wrapper


def _instrument(totals) -> dict:
    """Patch the timers in; returns the originals to restore."""
    saved = {name: getattr(tg.GPUQuery, name) for name in METHODS}
    saved["select_and_bound"] = Candidates.select_and_bound
    saved["compute_ppr_gpu"] = tg.compute_ppr_gpu
    for name in METHODS:
        setattr(tg.GPUQuery, name, _timed(totals, STEP_OF.get(name, name), saved[name]))
    Candidates.select_and_bound = _timed(totals, "bound", saved["select_and_bound"])
    tg.compute_ppr_gpu = _timed(totals, "compute", saved["compute_ppr_gpu"])
    finish = tg.GPUQuery.estimate_finish

    def counting(self, *a, **kw):  # the round's record has arrived
        out = finish(self, *a, **kw)
        record = self.tops.record
        profiled[id(self)] = (int(record[4]) + self.launches, record[5], record[1])
        return out

    start = tg.GPUQuery.start

    def starting(self, s):  # the previous query's counts
        last = profiled.get(id(self), (0, 0, 0))
        for key, x in zip(("frontiers", "edges", "touched"), last, strict=True):
            totals[key] += x
        profiled[id(self)] = (0, 0, 0)
        start(self, s)

    tg.GPUQuery.estimate_finish, tg.GPUQuery.start = counting, starting
    return saved


def _count_last(idx, totals) -> None:
    ws = next(iter(idx.cache.get("workspaces").values()))  # one thread: one workspace
    for key, x in zip(("frontiers", "edges", "touched"), profiled.get(id(ws), (0, 0, 0)), strict=True):
        totals[key] += x
    profiled[id(ws)] = (0, 0, 0)


def _restore(saved: dict) -> None:
    for name, fn in saved.items():
        owner = tg.GPUQuery if name in METHODS else Candidates if name == "select_and_bound" else tg
        setattr(owner, name, fn)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("graphs", nargs="+")
    ap.add_argument("--k", type=int, action="append")
    ap.add_argument("--queries", type=int, default=20)
    args = ap.parse_args()
    for src in args.graphs:
        if src.startswith("rmat:"):
            g = graphs.rmat(int(src[5:]), seed=0, device="gpu")
        else:
            g = graphs.read_edgelist(src).to("gpu")
        idx = build_ppr_index(g, seed=0)
        srcs = _sources(g, args.queries, seed=1)
        for k in args.k or (100, 1000):
            for label, switches in VARIANTS:
                topk_ppr(idx, srcs[:2], k=k, streams=1, **switches)
                plain = topk_ppr(idx, srcs, k=k, streams=1, **switches)
                totals = defaultdict(float)
                saved = _instrument(totals)
                res = topk_ppr(idx, srcs, k=k, streams=1, **switches)
                _count_last(idx, totals)
                _restore(saved)
                q = len(srcs)
                times = {name: round(1e3 * totals[name] / q, 3) for name in STEPS}
                print(
                    f"{src} n={g.n:,} m={g.m:,} k={k} {label}: latency median "
                    f"{1e3 * np.median(plain.seconds):.2f} ms, mean {1e3 * plain.seconds.mean():.2f} ms"
                )
                print(f"  ms per query, synchronised: {times}")
                print(
                    f"  rounds {res.rounds.mean():.2f}, frontiers {totals['frontiers'] / q:.1f}, pushes "
                    f"{res.pushes.mean():,.0f}, edges {totals['edges'] / q:,.0f}, touched "
                    f"{totals['touched'] / q:,.0f}, candidates {res.candidates.mean():,.0f}, "
                    f"fallbacks {int(res.fallback.sum())}, exact {int(res.exact.sum())}"
                )


if __name__ == "__main__":
    main()
