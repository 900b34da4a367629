"""Numba loops of the CPU top-k PPR query (``_topk_cpu``); each releases the GIL.

A query of a threaded batch runs a whole round in one call (``_round_cpu``): the push, the
candidates, Alg. 4 and Alg. 6 and the round's top k. Its threads then take the GIL once a round, for the
stop test, instead of at every step: several calls and NumPy steps a round would have many threads
queueing for it.
"""

from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from graphs._mix import mix64
from operators.topk.walks import _U_GOLDEN, _walk_cpu

# what a round reads of the index (the push thresholds' factor ``beta``: the index's, or ones), and of the
# workspace (``s`` the source, ``nt`` the touched count)
RoundArrays = namedtuple(
    "RoundArrays",
    "indptr indices deg1 beta alpha h_index hptr h_end h_freq ret omega ip1 starts ip2 freqs own high",
)
Workspace = namedtuple("Workspace", "r pi0 mark touched queue s nt")


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
def _estimate_one(t, ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own, skip, step):
    """Alg. 6 for candidate t: its reserve and own share, its start list's walks, and H's estimate. The
    walks of entries skip, skip + step, ... of the list, each weighted step (Alg. 6: 0 and 1; the
    refinement reads long lists in part, ``_topk_refine``)."""
    acc = 0.0
    nf = ip2[t + 1] - ip2[t]
    for j in range(ip1[t] + skip, ip1[t + 1], step):
        v = starts[j]
        if r[v] > 0.0:
            k = j - ip1[t]
            f = freqs[ip2[t] + k] if k < nf else 1
            acc += r[v] * f / omega[v]
    h = h_index[t]
    return pi0[t] + own * r[t] + step * acc + (est_h[h] if h >= 0 else 0.0)


@nb.njit(parallel=True, cache=True)
def _compute_ppr_cpu(cand, ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own, out):
    for i in nb.prange(cand.size):
        out[i] = _estimate_one(cand[i], ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own, 0, 1)


@nb.njit(cache=True, nogil=True)
def _compute_ppr_serial(cand, ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own, out):
    for i in range(cand.size):  # a query of a threaded batch: Numba's pool is not shared between threads
        out[i] = _estimate_one(cand[i], ip1, starts, ip2, freqs, r, omega, pi0, h_index, est_h, own, 0, 1)


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
def _start_cpu(touched, nt, r, pi0, mark, s):
    """Clear the last query's touched vertices, then start source ``s``; returns the touched count."""
    for i in range(nt):
        u = touched[i]
        r[u] = 0.0
        pi0[u] = 0.0
        mark[u] = 0
    r[s] = 1.0
    mark[s] = 2
    touched[0] = s
    return 1


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


@nb.njit(cache=True, nogil=True)
def _select_cpu(verts, est, k, perm):
    """``select_top`` in Numba (an empty ``perm``: the ids are the graph's own): positions of the k
    largest estimates, decreasing, ties in float32 ranked by id."""
    key = (-est).astype(np.float32)
    if est.size > k:
        sel = np.flatnonzero(key <= np.partition(key, k - 1)[k - 1])
    else:
        sel = np.arange(est.size)
    ids = np.empty(sel.size, dtype=np.int64)
    for i in range(sel.size):
        v = verts[sel[i]]
        ids[i] = perm[v] if perm.size else v
    by_id = np.argsort(ids, kind="mergesort")
    by_key = np.argsort(key[sel][by_id], kind="mergesort")  # stable: equal keys stay in id order
    return sel[by_id[by_key]][:k]


@nb.njit(cache=True, nogil=True)
def _round_head(g, q, rmax, tau, high_irw, est_h):
    """The push from the touched vertices, then the candidates and Alg. 4 over H into ``est_h``:
    (pushes, touched count, candidates, returned mass). ``g``: RoundArrays, ``q``: Workspace. The
    candidates are not sorted by reserve as the paper's line says: each is estimated on its own and the
    top k ranks ties by id, so their order changes nothing (as on the GPU)."""
    pushes, nt = _afp_cpu(
        g.indptr, g.indices, g.deg1, g.beta, rmax, q.s, g.alpha, q.r, q.pi0, q.mark, q.touched, q.nt, q.queue
    )
    cand = _candidates_cpu(q.touched, nt, q.pi0, g.h_index, tau, high_irw)
    est_h[:] = 0.0
    returned = _bound_reduction_cpu(q.touched, nt, g.hptr, g.h_end, g.h_freq, g.ret, q.r, g.omega, est_h)
    return pushes, nt, cand, returned


@nb.njit(cache=True, nogil=True)
def _round_tail(cand, est_c, r, pi0, high, est_h, own, high_irw, k, perm):
    """H's estimates after the candidates' (with ``high_irw``), then the round's top k:
    (vertices, estimates, and all the listed vertices and their estimates)."""
    if high_irw:
        nc = cand.size
        verts = np.empty(nc + high.size, dtype=cand.dtype)
        est = np.empty(nc + high.size)
        verts[:nc], est[:nc] = cand, est_c
        for i in range(high.size):
            h = high[i]
            verts[nc + i] = h
            est[nc + i] = pi0[h] + own * r[h] + est_h[i]
    else:
        verts, est = cand, est_c
    best = _select_cpu(verts, est, k, perm)
    return verts[best], est[best], verts, est


@nb.njit(cache=True, nogil=True)
def _round_cpu(g, q, rmax, tau, high_irw, est_h, k, perm):
    """A whole round in this thread: ``_round_head``, Alg. 6 serially, ``_round_tail``;
    (pushes, touched count, vertices, estimates, candidates, returned mass, listed, their estimates)."""
    pushes, nt, cand, returned = _round_head(g, q, rmax, tau, high_irw, est_h)
    est_c = np.empty(cand.size)
    _compute_ppr_serial(
        cand, g.ip1, g.starts, g.ip2, g.freqs, q.r, g.omega, q.pi0, g.h_index, est_h, g.own, est_c
    )
    verts, est, listed, est_all = _round_tail(
        cand, est_c, q.r, q.pi0, g.high, est_h, g.own, high_irw, k, perm
    )
    return pushes, nt, verts, est, cand.size, returned, listed, est_all
