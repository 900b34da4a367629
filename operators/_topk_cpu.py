"""CPU (Numba) primitives of the top-k PPR query: forward push, IRW and H estimates, fallback walks.

One ``CPUQuery`` per thread holds the per-source workspace (residues, reserves, the touched list),
reset in O(touched) between sources. ``mark`` bits: 1 = queued for a push, 2 = touched. The loops
release the GIL, so that a batch answers several sources at once on threads (``_topk_batch``); a
query on such a thread (``serial``) estimates its candidates in one thread too.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphs._device import to_host
from graphs._mix import mix64

from ._irw import _U_GOLDEN, _walk_cpu


@nb.njit(cache=True, nogil=True)
def _afp_cpu(indptr, indices, deg1, beta, rmax, s, alpha, r, pi0, mark, touched, nt, queue):
    """Adaptive forward push (FIFO) from the touched vertices above r(u) > d(u) beta(u) r_max."""
    n = r.size
    tail = 0
    for i in range(nt):  # regenerate the frontier
        u = touched[i]
        if r[u] > deg1[u] * beta[u] * rmax and (mark[u] & 1) == 0:
            mark[u] |= 1
            queue[tail] = u
            tail += 1
    head = 0
    size = tail
    tail %= n
    pushes = 0
    while size > 0:
        u = queue[head]
        head = (head + 1) % n
        size -= 1
        mark[u] &= 2
        ru = r[u]
        r[u] = 0.0
        pi0[u] += (1.0 - alpha) * ru
        pushes += 1
        lo, hi = indptr[u], indptr[u + 1]
        if hi == lo:  # no out-edges: the walk jumps back to the source
            lo, hi, inc = -1, 0, alpha * ru
        else:
            inc = alpha * ru / (hi - lo)
        for e in range(lo, hi):
            w = s if e < 0 else indices[e]
            r[w] += inc
            if (mark[w] & 2) == 0:
                mark[w] |= 2
                touched[nt] = w
                nt += 1
            if (mark[w] & 1) == 0 and r[w] > deg1[w] * beta[w] * rmax:
                mark[w] |= 1
                queue[tail] = w
                tail = (tail + 1) % n
                size += 1
    return pushes, nt


@nb.njit(cache=True, nogil=True)
def _estimate_one(t, ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own):
    """Alg. 6 for candidate t: its reserve and own share, its start list's walks, and H's estimate."""
    acc = 0.0
    nf = ip2[t + 1] - ip2[t]
    for j in range(ip1[t], ip1[t + 1]):
        v = starts[j]
        if r[v] > 0.0:
            k = j - ip1[t]
            f = freqs[ip2[t] + k] if k < nf else 1
            acc += r[v] * f / omega[v]
    h = h_index[t]
    return pi0[t] + own * r[t] + acc + (est_h[h] if h >= 0 else 0.0)


@nb.njit(parallel=True, cache=True)
def _compute_ppr_cpu(cand, ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own, out):
    for i in nb.prange(cand.size):
        out[i] = _estimate_one(cand[i], ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own)


@nb.njit(cache=True, nogil=True)
def _compute_ppr_serial(cand, ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own, out):
    for i in range(cand.size):  # a query of a threaded batch: Numba's pool is not shared between threads
        out[i] = _estimate_one(cand[i], ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own)


@nb.njit(cache=True, nogil=True)
def _bound_reduction_cpu(touched, nt, hptr, h_end, h_freq, ret, r, omega, est_h):
    """Walk part of the estimates of H (Alg. 4); returns the returned mass sum_v r(v) b_v too."""
    returned = 0.0
    for i in range(nt):
        v = touched[i]
        if r[v] > 0.0:
            w = r[v] / omega[v]
            returned += w * ret[v]
            for e in range(hptr[v], hptr[v + 1]):
                est_h[h_end[e]] += w * h_freq[e]
    return returned


@nb.njit(cache=True, nogil=True)
def _fallback_cpu(indptr, indices, touched, nt, r, pi0, alpha, walks_per_mass, key):
    est = pi0.copy()
    ret = 0.0
    g = np.uint64(0)
    stop = 1.0 - alpha
    for i in range(nt):
        v = touched[i]
        if r[v] <= 0.0:
            continue
        nv = max(1, int(np.ceil(r[v] * walks_per_mass)))
        share = r[v] / nv
        for _ in range(nv):
            t = _walk_cpu(indptr, indices, v, mix64(key + g * _U_GOLDEN), stop, False)
            g += np.uint64(1)
            if t >= 0:
                est[t] += share
            else:
                ret += share
    return est, ret, g


@nb.njit(cache=True, nogil=True)
def _clear_cpu(touched, nt, r, pi0, mark):
    for i in range(nt):
        u = touched[i]
        r[u] = 0.0
        pi0[u] = 0.0
        mark[u] = 0


@nb.njit(cache=True, nogil=True)
def _candidates_cpu(touched, nt, pi0, h_index, tau, exclude_h):
    out = np.empty(nt, dtype=touched.dtype)
    c = 0
    for i in range(nt):
        u = touched[i]
        if pi0[u] >= tau and not (exclude_h and h_index[u] >= 0):
            out[c] = u
            c += 1
    return out[:c]


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
    return sel[np.lexsort((ids, key[sel]))][:k]


def tie_order(index):
    """``(perm, inv)`` on the host for an index that holds a renumbered copy of its graph (vertex i of
    the copy is vertex perm[i] of the graph, and inv[perm[i]] = i), else ``(None, None)``: answers rank
    ties, and fill with PPR-0 vertices, by the graph's own ids. Kept with the index."""
    got = index.__dict__.get("_tie_order")
    if got is None:
        if index.perm is None:
            got = (None, None)
        else:
            perm = np.ascontiguousarray(to_host(index.perm), dtype=np.int64)
            inv = np.empty_like(perm)
            inv[perm] = np.arange(perm.size)
            got = (perm, inv)
        index.__dict__["_tie_order"] = got
    return got


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

    def start(self, s: int) -> None:
        _clear_cpu(self.touched, self.nt, self.r, self.pi0, self.mark)  # in Numba: a batch's threads run it
        self.s = s
        self.r[s] = 1.0
        self.mark[s] = 2
        self.touched[0] = s
        self.nt = 1
        self.push_count = 0

    def push(self, rmax: float, *, adaptive: bool, tiling: bool, persistent: bool) -> None:
        beta = self.index.arrays["beta"] if adaptive else self.ones
        pushes, self.nt = _afp_cpu(
            self.indptr, self.indices, self.deg1, beta, rmax, self.s, self.index.params.alpha,
            self.r, self.pi0, self.mark, self.touched, self.nt, self.queue,
        )  # fmt: skip
        self.push_count += int(pushes)

    def pushes(self) -> int:
        return self.push_count

    def closed_reach(self, limit: int):
        """The touched vertices when at most ``limit`` and each was pushed (see ``_topk_exact``)."""
        t = self.touched[: self.nt]
        return t.copy() if self.nt <= limit and (self.pi0[t] > 0).all() else None

    def estimate(self, tau: float, k: int, *, high_irw: bool, tiling: bool):
        """The round's top k (internal ids, unnormalised estimates), the number of candidates and
        the returned mass: candidates by reserve, Alg. 4 over H, Alg. 6 over the candidates."""
        cand = self.candidates(tau, exclude_h=high_irw)
        ncand = cand.size
        est_h = self.bound_reduction()
        est_c = self.compute_ppr(cand, est_h)
        if high_irw:
            high = self.index.arrays["high"]
            own = self.pi0[high] + self.index.params.own_share * self.r[high]
            cand, est_c = np.concatenate([cand, high]), np.concatenate([est_c, own + est_h])
        best = select_top(cand, est_c, k, tie_order(self.index)[0])
        return cand[best], est_c[best], ncand, self.returned_mass

    # the query driver's round protocol (``topk_ppr._query``): on the CPU the round runs at launch
    def estimate_launch(self, tau: float, k: int, *, high_irw: bool, tiling: bool) -> None:
        self.round = self.estimate(tau, k, high_irw=high_irw, tiling=tiling)

    def ready(self) -> bool:
        return True

    def estimate_finish(self):
        return self.round

    def candidates(self, tau: float, exclude_h: bool):
        c = _candidates_cpu(self.touched, self.nt, self.pi0, self.index.arrays["h_index"], tau, exclude_h)
        return c[np.argsort(-self.pi0[c], kind="stable")]

    def bound_reduction(self):
        a = self.index.arrays
        est_h = np.zeros(a["high"].size)
        self.returned_mass = _bound_reduction_cpu(
            self.touched, self.nt, a["hptr"], a["h_end"], a["h_freq"], a["ret"], self.r, self.omega, est_h
        )
        return est_h

    def compute_ppr(self, cand, est_h):
        a = self.index.arrays
        out = np.empty(cand.size)
        (_compute_ppr_serial if self.serial else _compute_ppr_cpu)(
            cand, a["ip1"], a["starts"], a["ip2"], a["freqs"], self.r, self.omega, self.pi0,
            a["h_index"], est_h, self.index.params.own_share, out,
        )  # fmt: skip
        return out

    def fallback(self, walks_per_mass: float, key: int):
        est, ret, walks = _fallback_cpu(
            self.indptr, self.indices, self.touched, self.nt, self.r, self.pi0,
            self.index.params.alpha, walks_per_mass, np.uint64(key),
        )  # fmt: skip
        est /= 1.0 - ret
        perm = tie_order(self.index)[0]
        best = np.argsort(-est, kind="stable") if perm is None else np.lexsort((perm, -est))
        return best, est, int(walks)


def _query_constants(index):
    """Per index, shared by its workspaces: max(d_out, 1) and ones (the push thresholds' factors), and
    omega scaled so that first-step walks carry the alpha share of a residue (the rest of r(s, t) is
    added to t exactly: own_share)."""
    got = index.__dict__.get("_cpu_query_constants")
    if got is None:
        g = index.graph
        deg1 = np.maximum(np.diff(g.indptr), 1).astype(np.float64)
        omega = index.arrays["omega"].astype(np.float64) / index.params.walk_share
        got = index.__dict__["_cpu_query_constants"] = (deg1, np.ones(g.n), omega)
    return got
