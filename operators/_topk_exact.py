"""Exact top k of a source whose walks can reach only a few vertices.

After a push, the touched set T holds every vertex that has received mass. When each vertex of T has
been pushed at least once (its reserve is positive), each has sent mass along all its out-edges, so T
is closed under out-edges (a dangling vertex's share returns to s, in T): T is exactly the set of
vertices reachable from s, and pi(s, t) = 0 for t outside T. Then the PPR of T solves the |T| x |T|
system (I - alpha M) x = (1 - alpha) e_s, with M[v, u] the share of u's walks that step to v (edge
multiplicity over d_out(u); a dangling u steps to s), exactly, where Algorithm 3 would fail every
round for want of k estimates and end in the Monte-Carlo fallback. (On soc-Slashdot0902, 6,550 of
the 78,441 vertices with out-edges have only a self-loop.)

A source whose walks never leave it (no out-edge, or self-loops only) is the smallest case (T = {s},
pi(s, s) = 1), and a common one: about half of an R-MAT graph's vertices have no out-edge, so half of a
batch of uniformly random sources. ``lone_sources`` finds them and ``lone_topk`` answers them without
any round, as the solve would.
"""

from __future__ import annotations

import numpy as np

from graphs._device import array_module, to_host

from ._topk_cpu import select_top

EXACT_REACH = 256  # largest closed touched set solved densely (a 256 x 256 solve takes about 1 ms)


def closed_reach_topk(G, reach, s: int, alpha: float, k: int):
    """Vertices (internal ids) and PPR of the top k from ``s`` when ``reach`` (host ids, every touched
    vertex, each pushed at least once) is closed under out-edges; None when it is not."""
    t = np.sort(np.asarray(reach, dtype=np.int64))
    nt = t.size
    xp = array_module(G.indptr)
    rows = xp.asarray(t)
    lo, hi = to_host(G.indptr[rows]), to_host(G.indptr[rows + 1])
    deg = hi - lo
    first = np.cumsum(deg) - deg  # each row's first position in the gathered edge list
    pos = np.repeat(lo - first, deg) + np.arange(int(deg.sum()))
    dst = to_host(G.indices[xp.asarray(pos)]).astype(np.int64)
    dst_local = np.minimum(np.searchsorted(t, dst), nt - 1)
    if not np.array_equal(t[dst_local], dst):  # an out-edge leaves T: not closed
        return None
    src_local = np.repeat(np.arange(nt), deg)
    m = np.zeros((nt, nt))
    np.add.at(m, (dst_local, src_local), 1.0 / deg[src_local])
    s_local = int(np.searchsorted(t, s))
    m[s_local, deg == 0] += 1.0
    rhs = np.zeros(nt)
    rhs[s_local] = 1.0 - alpha
    x = np.maximum(np.linalg.solve(np.eye(nt) - alpha * m, rhs), 0.0)
    best = select_top(t, x, min(k, nt))
    verts, vals = t[best], x[best]
    if nt < k:  # then vertices outside T (PPR 0), the smallest ids first
        rest = np.setdiff1d(np.arange(min(G.n, k + nt)), t, assume_unique=True)[: k - nt]
        verts, vals = np.concatenate([verts, rest]), np.concatenate([vals, np.zeros(k - nt)])
    return verts, vals


LONE_DEGREE = 4  # sources of up to this many out-edges are checked for self-loops only


def lone_sources(G, src: np.ndarray) -> np.ndarray:
    """Which of ``src`` (internal ids, host) have no out-edge to another vertex (one gather per batch)."""
    xp = array_module(G.indptr)
    rows = xp.asarray(src)
    lo, hi = to_host(G.indptr[rows]), to_host(G.indptr[rows + 1])
    deg = hi - lo
    lone = deg == 0
    few = np.flatnonzero((deg > 0) & (deg <= LONE_DEGREE))
    if few.size:
        count = deg[few]
        pos = np.repeat(lo[few] - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
        dst = to_host(G.indices[xp.asarray(pos)]).astype(np.int64)
        owner = np.repeat(few, count)
        leaves = np.zeros(src.size, dtype=bool)
        leaves[owner[dst != src[owner]]] = True
        lone[few] = ~leaves[few]
    return lone


def lone_topk(sources: np.ndarray, k: int, n: int):
    """Top k (internal ids, PPR) of lone sources: the source (PPR 1), then the smallest other ids
    (PPR 0), as ``closed_reach_topk`` orders them; rows follow ``sources``."""
    s = np.asarray(sources, dtype=np.int64).reshape(-1, 1)
    rest = np.arange(min(k, n) - 1, dtype=np.int64)[None, :]
    verts = np.concatenate([s, rest + (rest >= s)], axis=1)
    vals = np.zeros(verts.shape)
    vals[:, 0] = 1.0
    return verts, vals
