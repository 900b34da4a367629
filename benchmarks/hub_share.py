"""How much of a forward push's work a hub index could save: the share of its edge scans spent at the
vertices of highest PageRank (CPU; counts, not times).

A hub index (HubPPR, FORA+) keeps precomputed PPR vectors of the hubs, so that a push reaching a hub
adds its vector instead of expanding it: at most the hubs' share of the edge scans is saved, before the
cost of adding their vectors. The push is FORA's: vertex v is pushed while r(v) > r_max * d(v), alpha =
0.8 (the probability of following an edge). ``python -m benchmarks.hub_share --scales 18,20``.
"""

from __future__ import annotations

import argparse

import numba
import numpy as np

import graphs
from graphs._device import to_host
from operators import pagerank

FRACTIONS = (1e-4, 1e-3, 1e-2)  # hub sets: the top share of vertices by PageRank


@numba.njit(cache=True)
def push_scans(indptr, indices, s, alpha, r_max):
    """Edge scans by vertex of a forward push from ``s`` to residues r(v) <= r_max * d(v) (FIFO order)."""
    n = indptr.size - 1
    r = np.zeros(n)
    scans = np.zeros(n, dtype=np.int64)
    queued = np.zeros(n, dtype=np.bool_)
    queue = np.empty(n, dtype=np.int64)
    head, tail, size = 0, 1, 1
    r[s], queue[0], queued[s] = 1.0, s, True
    while size:
        v = queue[head]
        head, size = (head + 1) % n, size - 1
        queued[v] = False
        d = indptr[v + 1] - indptr[v]
        if d == 0 or r[v] <= r_max * d:
            continue
        share = alpha * r[v] / d
        r[v] = 0.0
        scans[v] += d
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            r[u] += share
            if not queued[u] and r[u] > r_max * max(indptr[u + 1] - indptr[u], 1):
                queue[tail] = u
                tail, size = (tail + 1) % n, size + 1
                queued[u] = True
    return scans


def run(scale: int, sources: int = 32, r_maxes=(1e-5, 1e-6, 1e-7)) -> list[str]:
    g = graphs.rmat(scale, 16, seed=0, device="cpu")
    indptr, indices = to_host(g.indptr).astype(np.int64), to_host(g.indices).astype(np.int64)
    ranks = pagerank(g, alpha=0.85, tol=1e-12)  # an L1 change below n * 1e-12 (NetworkX's rule)
    order = np.argsort(-to_host(ranks), kind="stable")
    deg = np.diff(indptr)
    srcs = np.random.default_rng(1).choice(np.flatnonzero(deg > 0), sources, replace=False)
    lines = [f"R-MAT {scale}: n={g.n:,} m={g.m:,}; {sources} sources with out-edges; alpha=0.8"]
    for r_max in r_maxes:
        total = sum(push_scans(indptr, indices, int(s), 0.8, r_max) for s in srcs)
        parts = []
        for frac in FRACTIONS:
            hubs = order[: max(1, int(frac * g.n))]
            parts.append(
                f"top {frac:.2%} ({hubs.size:,} vertices, {deg[hubs].sum() / g.m:.1%} of the edges): "
                f"{total[hubs].sum() / total.sum():.1%}"
            )
        lines.append(
            f"r_max {r_max:g}: {total.sum() / sources:,.0f} edge scans a source; at " + "; ".join(parts)
        )
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scales", default="18,20", help="R-MAT scales (edge factor 16, seed 0)")
    for scale in (int(s) for s in ap.parse_args(argv).scales.split(",") if s):
        print("\n".join(run(scale)), flush=True)


if __name__ == "__main__":
    main()
