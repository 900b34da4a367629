"""The high-IRW set's cap (|H| <= share * n; 0.1% by default) against top-k latency and batch throughput.

python -m benchmarks.topk_hshare GRAPH[,GRAPH...] SHARE[,SHARE...] [--batch N] [--passes P]

GRAPH is an R-MAT scale (``24``) or a SNAP name under ``$GRAPHJOBS_DATASETS`` (``soc-Epinions1``). Per
graph and cap it builds the index on the GPU, then prints |H|, omega_I^ub, the H entries and, for k = 100
and 1000: the median and mean latency of 20 sources one at a time, their mean rounds and candidates,
precision@k of 4 of them against exact PPR, and the queries/s of a batch of N random sources at the
default streams. Results: ``results/topk-hshare-h100-645acc5.txt``.
"""

from __future__ import annotations

import argparse
import os
import time

import cupy as cp
import numpy as np

import graphs
from benchmarks.topk_ppr import _sources
from operators import build_ppr_index, ppr, topk_ppr
from operators.ppr.metrics import precision_at_k
from operators.topk import index as ppr_index


def _graph(name: str):
    if name.isdigit():
        return graphs.rmat(int(name), seed=0, device="gpu")
    folder = os.environ.get("GRAPHJOBS_DATASETS", ".data")
    return graphs.read_edgelist(f"{folder}/{name}.txt.gz").to("gpu")


def _queries(g, idx, srcs, many, exact, k: int, passes: int) -> str:
    topk_ppr(idx, srcs[:2], k=k)  # warm-up
    one = topk_ppr(idx, srcs, k=k, streams=1)
    ms = one.seconds * 1e3
    checked = topk_ppr(idx, srcs[: len(exact)], k=k, streams=1)
    prec = np.mean([precision_at_k(x, g.internal_ids(checked.row(i)[0]), k) for i, x in enumerate(exact)])
    rates = []
    for _ in range(passes):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        batch = topk_ppr(idx, many, k=k)
        cp.cuda.Device().synchronize()
        rates.append(len(many) / (time.perf_counter() - t0))
    qps = " ".join(f"{r:.0f}" for r in rates)
    return (
        f"  k={k}: median {np.median(ms):.3f} mean {ms.mean():.3f} ms rounds {one.rounds.mean():.2f} "
        f"cand {one.candidates.mean():.0f} fallback {int(one.fallback.sum())} "
        f"prec({len(exact)}) {prec:.4f} batch q/s {qps} rounds(batch) {batch.rounds.mean():.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs")
    ap.add_argument("shares")
    ap.add_argument("--batch", type=int, default=1500)
    ap.add_argument("--passes", type=int, default=1)
    args = ap.parse_args()
    default = ppr_index.HIGH_SHARE
    try:
        for name in args.graphs.split(","):
            g = _graph(name)
            srcs, many = _sources(g, 20, seed=1), _sources(g, args.batch, seed=2)
            exact = ppr(g, srcs[:4], method="power", tol=1e-9).get()
            for share in (float(s) for s in args.shares.split(",")):
                ppr_index.HIGH_SHARE = share  # read by build_ppr_index
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                idx = build_ppr_index(g, seed=0)
                cp.cuda.Device().synchronize()
                print(
                    f"{name} share {share}: |H|={idx.info['high']} ub={idx.omega_i_ub} "
                    f"h_entries={int(idx.arrays['h_end'].size)} irw_pairs={idx.info['irw_pairs']} "
                    f"build {time.perf_counter() - t0:.2f}s",
                    flush=True,
                )
                for k in (100, 1000):
                    print(_queries(g, idx, srcs, many, exact, k, args.passes), flush=True)
                del idx
    finally:
        ppr_index.HIGH_SHARE = default


if __name__ == "__main__":
    main()
