"""CPU workspace and round of the top-k PPR query, over the Numba loops of ``_topk_cpu_loops``.

One ``CPUQuery`` per thread holds the per-source workspace (residues, reserves, the touched list),
reset in O(touched) between sources. ``mark`` bits: 1 = queued for a push, 2 = touched. The loops
release the GIL, so that a batch answers several sources at once on threads (``_topk_batch``); a
query on such a thread (``serial``) runs each round in one call, its candidates estimated in that
thread too; a query alone estimates them on Numba's threads.
"""

from __future__ import annotations

import numpy as np

from graphs._device import to_host
from operators.topk.cpu.loops import (
    RoundArrays,
    Workspace,
    _compute_ppr_cpu,
    _fallback_cpu,
    _round_cpu,
    _round_head,
    _round_tail,
    _start_cpu,
)


def select_top(verts, est, k: int, perm=None):
    """Positions of the k largest estimates, decreasing; estimates equal in float32 (a relative
    1e-7, far below any guarantee) rank by vertex id, so that the answer does not depend on the
    order of the list nor on the order of floating-point atomic adds. The id is that of the graph the
    index was built from: ``perm[v]`` for an index of a renumbered copy (``tie_order``)."""
    key = -est.astype(np.float32)
    if est.size > k:  # all ties of the k-th value, then the exact order among them
        sel = np.flatnonzero(key <= np.partition(key, k - 1)[k - 1])
    else:
        sel = np.arange(est.size)
    ids = verts[sel] if perm is None else perm[verts[sel]]
    return sel[_rank(key[sel], ids)][:k]


def _rank(key, ids):
    """The order of increasing ``key`` (float32), then id. For keys <= 0 and ids below 2**32 (the case of
    ``select_top``'s, negated estimates) as one sort of 64-bit words, whose upper half orders as the
    key does, which is cheaper than ``np.lexsort``'s two passes."""
    if key.size and key.max() <= 0 and ids.max() < 2**32:  # (not for NaN)
        bits = (-key + np.float32(0)).view(np.uint32).astype(np.uint64)  # -0.0 as 0.0
        return np.argsort(((np.uint64(0xFFFFFFFF) - bits) << np.uint64(32)) | ids.astype(np.uint64))
    return np.lexsort((ids, key))


def tie_order(index):
    """``(perm, inv)`` on the host for an index that holds a renumbered copy of its graph (vertex i of
    the copy is vertex perm[i] of the graph, and inv[perm[i]] = i), else ``(None, None)``: answers rank
    ties by the graph's own ids. Kept with the index."""

    def make():
        if index.perm is None:
            return (None, None)
        perm = np.ascontiguousarray(to_host(index.perm), dtype=np.int64)
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        return (perm, inv)

    return index.cache.setdefault("tie_order", make)


class CPUQuery:
    """The workspace and primitives of Algorithm 3 on the CPU."""

    def __init__(self, index):
        g = index.graph
        self.index, self.n = index, g.n
        self.indptr, self.indices = g.indptr, g.indices
        self.deg1, self.ones, self.omega = _query_constants(index)
        self.serial = False  # on a thread of a batch: Alg. 6 in this thread too
        self.r = np.zeros(g.n)
        self.pi0 = np.zeros(g.n)
        self.mark = np.zeros(g.n, dtype=np.uint8)
        self.touched = np.empty(g.n, dtype=np.int32)
        self.queue = np.empty(g.n, dtype=np.int32)
        self.nt = 0
        a = index.arrays
        self.est_h = np.zeros(a["high"].size)  # Alg. 4's sums, written by each round
        self.listed = None  # the last round's listed vertices (candidates, H) and their estimates
        perm = tie_order(index)[0]
        self.perm = np.zeros(0, dtype=np.int64) if perm is None else perm
        self.arrays = {}  # the index's arrays as the loops take them, by ``adaptive``
        self.refine_seen = None  # the refinement's cache of in-neighbour estimates (``refine._seen``)

    def _graph(self, adaptive: bool) -> RoundArrays:
        got = self.arrays.get(adaptive)
        if got is None:
            a, P = self.index.arrays, self.index.params
            beta = a["beta"] if adaptive else self.ones
            got = self.arrays[adaptive] = RoundArrays(
                self.indptr,
                self.indices,
                self.deg1,
                beta,
                P.alpha,
                a["h_index"],
                a["hptr"],
                a["h_end"],
                a["h_freq"],
                a["ret"],
                self.omega,
                a["ip1"],
                a["starts"],
                a["ip2"],
                a["freqs"],
                P.own_share,
                a["high"],
            )
        return got

    def start(self, s: int) -> None:
        self.nt = _start_cpu(self.touched, self.nt, self.r, self.pi0, self.mark, s)
        self.s = s
        self.push_count = 0

    def push(self, rmax: float, *, adaptive: bool, tiling: bool, persistent: bool) -> None:
        self.rmax, self.adaptive = rmax, adaptive  # the push runs with the round's estimates

    def pushes(self) -> int:
        return self.push_count

    def closed_reach(self, limit: int):
        """The touched vertices when at most ``limit`` and each was pushed (see ``_topk_exact``)."""
        t = self.touched[: self.nt]
        return t.copy() if self.nt <= limit and (self.pi0[t] > 0).all() else None

    def estimate(self, tau: float, k: int, *, high_irw: bool, tiling: bool):
        """The round: the push from the touched vertices, the candidates pi0 >= tau, Alg. 4 over H and
        Alg. 6 over the candidates; returns the top k (internal ids, unnormalised estimates), the number
        of candidates and the returned mass."""
        g = self._graph(self.adaptive)
        q = Workspace(self.r, self.pi0, self.mark, self.touched, self.queue, self.s, self.nt)
        if self.serial:
            pushes, self.nt, verts, est, ncand, ret, *self.listed = _round_cpu(
                g, q, self.rmax, tau, high_irw, self.est_h, k, self.perm
            )
        else:  # Alg. 6 on Numba's threads
            pushes, self.nt, cand, ret = _round_head(g, q, self.rmax, tau, high_irw, self.est_h)
            est_c, est_h = np.empty(cand.size), self.est_h
            _compute_ppr_cpu(
                cand, g.ip1, g.starts, g.ip2, g.freqs, q.r, g.omega, q.pi0, g.h_index, est_h, g.own, est_c
            )
            verts, est, *self.listed = _round_tail(
                cand, est_c, q.r, q.pi0, g.high, est_h, g.own, high_irw, k, self.perm
            )
            ncand = cand.size
        self.push_count += int(pushes)
        return verts, est, int(ncand), float(ret)

    # the query driver's round protocol (``topk_ppr._query``): on the CPU the round runs at launch
    def estimate_launch(self, tau: float, k: int, *, high_irw: bool, tiling: bool) -> None:
        self.round = self.estimate(tau, k, high_irw=high_irw, tiling=tiling)

    def ready(self) -> bool:
        return True

    def estimate_finish(self):
        return self.round

    def round_arrays(self) -> RoundArrays:
        """What the last round read of the index."""
        return self._graph(self.adaptive)

    def refine_launch(self, verts, raw, k: int, *, tau: float, rho: float, high_irw: bool, edges) -> None:
        """Refine the last round's answer at the k-th value (``_topk_refine``); on the CPU it runs here."""
        from operators.topk.refine import refine_cpu  # it ranks with this module's select_top

        self.round = refine_cpu(self, verts, raw, k, tau=tau, rho=rho, high_irw=high_irw, edges=edges)

    def refine_finish(self):
        """(vertices, raw estimates, band size) of ``refine_launch``."""
        return self.round

    def fallback(self, walks_per_mass: float, key: int):
        est, ret, walks = _fallback_cpu(
            self.indptr,
            self.indices,
            self.touched,
            self.nt,
            self.r,
            self.pi0,
            self.index.params.alpha,
            walks_per_mass,
            np.uint64(key),
        )
        est /= 1.0 - ret
        perm = tie_order(self.index)[0]
        best = np.argsort(-est, kind="stable") if perm is None else np.lexsort((perm, -est))
        return best, est, int(walks)


def _query_constants(index):
    """Per index, shared by its workspaces: max(d_out, 1) and ones (the push thresholds' factors), and
    omega scaled so that first-step walks carry the alpha share of a residue (the rest of r(s, t) is
    added to t exactly: own_share)."""

    def make():
        g = index.graph
        deg1 = np.maximum(np.diff(g.indptr), 1).astype(np.float64)
        omega = index.arrays["omega"].astype(np.float64) / index.params.walk_share
        return (deg1, np.ones(g.n), omega)

    return index.cache.setdefault("cpu_query_constants", make)
