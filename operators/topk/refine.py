"""Refining the top-k PPR answer at the k-th value: estimates from the in-neighbours' (our addition).

For t != s, pi(s, t) = alpha sum_{u -> t} pi(s, u) / d_out(u): a walk that stops at t came from an
in-neighbour u, which it visits with probability pi(s, u) / (1 - alpha). So the in-neighbours'
estimates, each divided by its out-degree, give a second unbiased estimate of pi(s, t). It rests on the
walks that end one step before t, which are about d_out(u) / alpha times as many per unit of mass as those
that end at t; where the in-neighbours have several out-edges, its variance is a fraction of the
direct estimate's (benchmarks/RESULTS.md, top-k section).

Which vertices (the band). Once the stop test has passed, only the order near the k-th estimate is in
doubt. A walk's weight is at most rho (Eq. 10), so the variance of t's walk part W(t) (its estimate
less pi0 and the residue's own share) is at most rho W(t); t is re-estimated when its estimate lies
within ``REFINE_Z`` such standard deviations (of t's and of the k-th's) of the k-th estimate. The answer is
then the vertices above the band with their estimates, and the best of the band by the new estimates.
An in-neighbour listed in the round (a candidate, or in H) has its estimate already; the others are
estimated here from their start lists as Alg. 6 does, except that a list of more than SAMPLE_FROM
entries is read in part: every SAMPLE_STRIDE-th entry from an offset hashed from (u, s), each weighted
SAMPLE_STRIDE, which keeps the estimate unbiased and the answer reproducible. Those lists hold most of
the entries read, so reading them in part cuts the refinement's cost at a loss of precision@k within the
walks' standard error (benchmarks/RESULTS.md, top-k section). A band of more than
``band_cap(k)`` vertices (a graph of many equal estimates) is left as it is. The source keeps its own
estimate.
"""

from __future__ import annotations

import warnings

import numba as nb
import numpy as np

from graphs._device import import_cupy
from operators.topk.cpu import select_top, tie_order
from operators.topk.cpu.loops import _estimate_one

REFINE_Z = 1.0
SAMPLE_FROM = 32  # the unlisted in-neighbours' start lists longer than this are read in part:
SAMPLE_STRIDE = 8  # every SAMPLE_STRIDE-th entry from a hashed offset, weighted SAMPLE_STRIDE (a power of 2)
REFINE_BYTES = 12  # per vertex, of a GPU workspace's refinement buffers (``_topk_refine_need.NeedBuffers``)


@nb.njit(cache=True, nogil=True)
def sample_offset(u, s):
    """The first entry read of in-neighbour u's long start list in the refinement of source s's answer
    (below SAMPLE_STRIDE; 32-bit arithmetic, as ``_topk_refine_need``'s kernels do it)."""
    h = (u * 0x9E3779B1 + s * 0x85EBCA77) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & 0xFFFFFFFF
    h ^= h >> 12
    return h & (SAMPLE_STRIDE - 1)


def band_cap(k: int) -> int:
    """The most band vertices re-estimated for a top k (at most 2^17: ``_topk_refine_gpu.REFINE_PARTS``)."""
    return min(2 * k + 1024, 1 << 17)


def in_edges(index):
    """The in-neighbour lists of the index's graph (row pointer, sources), built once and kept with the
    graph; None, with a warning, when the device has no room for them (queries then go unrefined)."""
    g = index.graph
    if not g.has_derived("transpose") and g.device == "gpu":
        cp = import_cupy()
        try:
            t = g.transpose()
        except cp.cuda.memory.OutOfMemoryError:
            cp.get_default_memory_pool().free_all_blocks()
            warnings.warn(
                f"no GPU memory for the in-edges of the graph ({g.m:,} edges): top-k answers are not "
                "refined at the k-th value (topk_ppr(refine=False) to silence this)",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
    else:
        t = g.transpose()
    return t.indptr, t.indices


def merge(verts, raw, band, smooth, k: int, perm):
    """The answer from the round's top k (``verts``, ``raw``, decreasing) and the band's new estimates:
    the top k's vertices outside the band, then the best of the band; (vertices, estimates), decreasing."""
    ordered = np.sort(band)  # a sort and a binary search: cheaper than np.isin
    at = np.minimum(np.searchsorted(ordered, verts), ordered.size - 1)
    inside = ordered[at] == verts
    v = np.concatenate((verts[~inside], band))
    e = np.concatenate((raw[~inside], smooth))
    best = select_top(v, e, k, perm)
    return v[best], e[best]


@nb.njit(cache=True, nogil=True)
def _band_cpu(listed, est, pi0, r, own, rho, kth, sdk, z, pos):
    """Positions in ``listed`` of the band; ``pos[t]`` = t's position, for every listed t."""
    out = np.empty(listed.size, dtype=np.int64)
    c = 0
    for i in range(listed.size):
        t = listed[i]
        pos[t] = i
        w = max(est[i] - pi0[t] - own * r[t], 0.0)
        if abs(est[i] - kth) <= z * (np.sqrt(rho * w) + sdk):
            out[c] = i
            c += 1
    return out[:c]


@nb.njit(cache=True, nogil=True)
def _smooth_cpu(
    band, listed, est, pos, in_ptr, in_idx, indptr, g, r, pi0, est_h, tau, high_irw, s, seen, out
):
    """alpha sum_{u -> t} est(u) / d_out(u) for each band position (``g``: RoundArrays); an in-neighbour
    that the round did not list is estimated once, kept in ``seen`` (cache, stamps, this call's stamp)."""
    cache, stamps, stamp = seen
    for b in range(band.size):
        t = listed[band[b]]
        if t == s:
            out[b] = est[band[b]]
            continue
        acc = 0.0
        for e in range(in_ptr[t], in_ptr[t + 1]):
            u = in_idx[e]
            h = g.h_index[u]
            if (high_irw and h >= 0) or pi0[u] >= tau:  # listed in the round
                val = est[pos[u]]
            elif stamps[u] == stamp:
                val = cache[u]
            else:
                skip, step = 0, 1
                if g.ip1[u + 1] - g.ip1[u] > SAMPLE_FROM:
                    skip, step = sample_offset(u, s), SAMPLE_STRIDE
                val = _estimate_one(
                    u, g.ip1, g.starts, g.ip2, g.freqs, r, g.omega, pi0, g.h_index, est_h, g.own, skip, step
                )
                cache[u] = val
                stamps[u] = stamp
            acc += val / (indptr[u + 1] - indptr[u])
        out[b] = g.alpha * acc


def _seen(q):
    """The CPU workspace's cache of in-neighbour estimates and its stamp for this call (a new one each)."""
    got = q.refine_seen
    if got is None or got[2] == np.iinfo(np.int32).max:
        n = q.pi0.size
        got = (np.empty(n), np.zeros(n, dtype=np.int32), 0)
    got = q.refine_seen = (got[0], got[1], got[2] + 1)
    return got


def refine_cpu(q, verts, raw, k, *, tau, rho, high_irw, edges, z=REFINE_Z):
    """The CPU query ``q``'s answer refined (see the module text): (vertices, raw estimates, band size)."""
    listed, est = q.listed
    vk = verts[k - 1]
    g = q.round_arrays()
    sdk = np.sqrt(rho * max(raw[k - 1] - q.pi0[vk] - g.own * q.r[vk], 0.0))
    band = _band_cpu(listed, est, q.pi0, q.r, g.own, rho, raw[k - 1], sdk, z, q.queue)
    if band.size > band_cap(k) or band.size == 0:
        return verts, raw, 0
    smooth = np.empty(band.size)
    _smooth_cpu(
        band,
        listed,
        est,
        q.queue,
        *edges,
        q.indptr,
        g,
        q.r,
        q.pi0,
        q.est_h,
        tau,
        high_irw,
        q.s,
        _seen(q),
        smooth,
    )
    v, e = merge(verts, raw, listed[band], smooth, k, tie_order(q.index)[0])
    return v, e, int(band.size)
