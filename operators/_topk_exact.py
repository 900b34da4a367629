"""Exact top k of a source whose walks can reach only a few vertices.

After a push, the touched set T holds every vertex that has received mass. When each vertex of T has
been pushed at least once (its reserve is positive), each has sent mass along all its out-edges, so T
is closed under out-edges (a dangling vertex's share returns to s, in T): T is exactly the set of
vertices reachable from s, and pi(s, t) = 0 for t outside T. Then the PPR of T solves the |T| x |T|
system (I - alpha M) x = (1 - alpha) e_s, with M[v, u] the share of u's walks that step to v (edge
multiplicity over d_out(u); a dangling u steps to s), exactly, where Algorithm 3 would fail every
round for want of k estimates and end in the Monte-Carlo fallback. (On soc-Slashdot0902, 6,550 of
the 78,441 vertices with out-edges have only a self-loop.)
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
