"""Numba kernels of single-source SimRank: hop vectors, meeting walks (D estimation), Horner sums.

Random streams (shared bit for bit with ``_simrank_gpu``): group g of vertex k has the key
``gk = mix64(mix64(key + (k+1) G) + (g+1) G)``; its stop/continue draw at step s is
``rand_u64(gk, s)``, and lane t draws its in-neighbours from ``lk = mix64(gk ^ (t+1) LANE)``:
draws 0 and 1 pick u1, u2 among I(k), draws 2s and 2s+1 move the two walks at step s.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphs._mix import mix64, rand_u64
from operators.simrank.plan import GROUP

_U_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_U_LANE = np.uint64(0xD1B54A32D192ED03)


def threads() -> int:
    """The threads a parallel kernel of this module runs on."""
    return nb.get_num_threads()


@nb.njit(inline="always", cache=True)
def _pick(indptr, indices, x, r):
    """The in-neighbour of x chosen by the 64-bit draw r (the top 32 bits scaled to the degree)."""
    a = indptr[x]
    d = np.uint64(indptr[x + 1] - a)
    return indices[a + np.int64(((r >> np.uint64(32)) * d) >> np.uint64(32))]


@nb.njit(cache=True)
def group_meets(indptr, indices, key, cont, k, g, lanes):
    """Meets among the ``lanes`` walk pairs of group g of vertex k."""
    gk = mix64(mix64(key + np.uint64(k + 1) * _U_GOLDEN) + np.uint64(g + 1) * _U_GOLDEN)
    u = np.empty(GROUP, dtype=np.int64)
    v = np.empty(GROUP, dtype=np.int64)
    alive = np.zeros(GROUP, dtype=np.bool_)
    left = 0
    for t in range(lanes):
        lk = mix64(gk ^ (np.uint64(t + 1) * _U_LANE))
        u[t] = _pick(indptr, indices, k, rand_u64(lk, np.uint64(0)))
        v[t] = _pick(indptr, indices, k, rand_u64(lk, np.uint64(1)))
        alive[t] = u[t] != v[t]
        left += alive[t]
    met = 0
    s = 1
    while left > 0 and (rand_u64(gk, np.uint64(s)) >> np.uint64(11)) < cont:
        for t in range(lanes):
            if not alive[t]:
                continue
            a, b = u[t], v[t]
            if indptr[a + 1] == indptr[a] or indptr[b + 1] == indptr[b]:
                alive[t] = False
                left -= 1
                continue
            lk = mix64(gk ^ (np.uint64(t + 1) * _U_LANE))
            a = _pick(indptr, indices, a, rand_u64(lk, np.uint64(2 * s)))
            b = _pick(indptr, indices, b, rand_u64(lk, np.uint64(2 * s + 1)))
            if a == b:
                met += 1
                alive[t] = False
                left -= 1
            u[t], v[t] = a, b
        s += 1
    return met


@nb.njit(parallel=True, cache=True)
def meets(indptr, indices, key, cont, counts, pv, pg0, pg1):
    """Meets per vertex, summed over the portions (vertex pv[p], groups pg0[p] .. pg1[p]-1)."""
    per = np.zeros(pv.size, dtype=np.int64)
    for p in nb.prange(pv.size):
        k = pv[p]
        total = 0
        for g in range(pg0[p], pg1[p]):
            lanes = min(GROUP, counts[k] - g * GROUP)
            total += group_meets(indptr, indices, key, cont, k, g, lanes)
        per[p] = total
    out = np.zeros(counts.size, dtype=np.int64)
    for p in range(pv.size):
        out[pv[p]] += per[p]
    return out


@nb.njit(parallel=True, cache=True)
def hops(out_indptr, out_indices, in_degree, source, sc, L):
    """pi^l = (1 - sqrt c)(sqrt c P)^l e_source for l = 0..L, as rows of an (L+1, n) array."""
    n = in_degree.size
    out = np.zeros((L + 1, n), dtype=np.float64)
    out[0, source] = 1.0 - sc
    scaled = np.empty(n, dtype=np.float64)
    for level in range(L):
        prev = out[level]
        for x in nb.prange(n):
            scaled[x] = prev[x] / in_degree[x] if in_degree[x] > 0 else 0.0
        nxt = out[level + 1]
        for j in nb.prange(n):  # (P x)(j) = sum over the out-neighbours y of j of x(y) / |I(y)|
            acc = 0.0
            for e in range(out_indptr[j], out_indptr[j + 1]):
                acc += scaled[out_indices[e]]
            nxt[j] = sc * acc
    return out


@nb.njit(parallel=True, cache=True)
def horner(in_indptr, in_indices, pis, diag, sc):
    """s^L of s^0 = D pi^L / (1 - sqrt c), s^l = sqrt c P^T s^(l-1) + D pi^(L-l) / (1 - sqrt c)."""
    L = pis.shape[0] - 1
    n = diag.size
    scale = 1.0 / (1.0 - sc)
    s = np.empty(n, dtype=np.float64)
    for j in nb.prange(n):
        s[j] = diag[j] * pis[L, j] * scale
    nxt = np.empty(n, dtype=np.float64)
    for level in range(1, L + 1):
        row = pis[L - level]
        for j in nb.prange(n):
            a, b = in_indptr[j], in_indptr[j + 1]
            acc = 0.0
            for e in range(a, b):
                acc += s[in_indices[e]]
            nxt[j] = (sc * acc / (b - a) if b > a else 0.0) + diag[j] * row[j] * scale
        s, nxt = nxt, s
    return s
