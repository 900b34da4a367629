"""How much the first-round touched sets of B random top-k sources overlap, and what share of the index's
H entries Alg. 4 reads: planning data for an Alg. 4 pass that serves several sources at once (CPU path).

python -m benchmarks.topk_overlap SCALE [B]

Per k in (100, 1000) and four groups of B sources (R-MAT SCALE, seed 0; index seed 0): the touched vertices
per source and of the group's union (shares of n), and the H entries that Alg. 4's pass reads for them
(``hptr`` lists of the touched vertices), per source and for the union, against the index's total.
Results: ``results/topk-overlap-cpu.txt``.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

import graphs
from benchmarks.topk_ppr import _sources
from operators import build_ppr_index
from operators.topk.cpu import CPUQuery


def main() -> None:
    scale, b = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 8
    g = graphs.rmat(scale, seed=0)
    t0 = time.perf_counter()
    idx = build_ppr_index(g, seed=0)
    hlen = np.diff(idx.arrays["hptr"])
    total = int(hlen.sum())
    print(
        f"R-MAT {scale}: index {time.perf_counter() - t0:.1f} s, |H| = {idx.info['high']}, "
        f"H entries {total / 1e6:.2f}M",
        flush=True,
    )
    srcs = g.internal_ids(_sources(g, 4 * b, seed=1))
    for k in (100, 1000):
        delta = 1.0 / (10 * k * math.log(g.n))  # the first round, at delta_init
        rmax = idx.params.r_max(delta)
        q = CPUQuery(idx)
        for group in range(4):
            sets = []
            for s in srcs[group * b : (group + 1) * b]:
                q.start(int(s))
                q.push(rmax, adaptive=True, tiling=False, persistent=False)
                q.estimate(0.5 * delta, k, high_irw=True, tiling=False)  # the CPU pushes with the round
                sets.append(q.touched[: q.nt].copy())
            union = np.unique(np.concatenate(sets))
            each = sum(int(hlen[t].sum()) for t in sets) / b
            both = int(hlen[union].sum())
            print(
                f"k={k} group {group}: touched {sum(map(len, sets)) / b / g.n:.3f} n per source, "
                f"{union.size / g.n:.3f} n in the union of {b}; H entries read {each / 1e6:.2f}M per "
                f"source ({each / total:.2f} of all), {both / 1e6:.2f}M for the union ({both / total:.2f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
