"""GPU estimates of the top-k PPR query: IRW sums over candidates (Alg. 6) and the Monte-Carlo fallback
(Algorithm 3, lines 27-32); the bound reduction over H (Alg. 4) is ``_topk_gpu_bound``.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from graphs._mix import MIX_CUDA, MIX_DEFINES
from operators._gpu.blocks import SCAN_CUDA
from operators._gpu.registry import Kernel
from operators.topk.gpu.bound import Candidates
from operators.topk.gpu.push import VERTEX_CUDA, VERTEX_DEFINES, PushState
from operators.topk.walks import WALK_CUDA

BIG_STEPS = 32  # a tile's steps over one start list, beyond which a block takes the list

ESTIMATE_KERNELS = r"""
// the walks of vertex t's start list [lo, hi) that a thread of `step` takes from lo + first
__device__ __forceinline__ double gj_irw_sum(long long lo, long long hi, long long f0, long long nf,
        long long first, int step, const int* starts, const int* freqs, const gj_vertex* vs,
        const double* inv_omega) {
    double acc = 0.0;
    for (long long j = lo + first; j < hi; j += step) {
        int v = starts[j];
        double rv = vs[v].r;
        if (rv > 0.0) acc += rv * inv_omega[v] * (j - lo < nf ? (double)freqs[f0 + j - lo] : 1.0);
    }
    return acc;
}
// Alg. 6: a tile of TSIZE threads per listed vertex (tsize = 1: a thread per vertex); the list holds
// offset + counts[0] vertices (the count stays on the device). A start list longer than big_list is
// left to gj_compute_big (its position appended to `big`, counted in counts[1]): one tile would
// take all of it alone while the rest of the grid waits.
extern "C" __global__ void gj_compute_ppr(const int* cand, int* counts, int offset, int tsize,
        long long big_list, int* big, const long long* ip1, const int* starts, const long long* ip2,
        const int* freqs, const gj_vertex* vs, const double* inv_omega, const double* pi0, const int* h_index,
        const double* est_h, double own, double* out) {
    const int tl = threadIdx.x % tsize, per_warp = 32 / tsize;
    const long long count = offset + (long long)counts[0];
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const long long nwarps = (long long)gridDim.x * blockDim.x / 32;
    for (long long base = warp * per_warp; base < count; base += nwarps * per_warp) {  // warp-uniform
        long long c = base + (threadIdx.x & 31) / tsize;
        double acc = 0.0;
        int t = c < count ? cand[c] : 0;
        if (c < count) {
            const long long lo = ip1[t], hi = ip1[t + 1], f0 = ip2[t];
            if (hi - lo <= big_list)
                acc = gj_irw_sum(lo, hi, f0, ip2[t + 1] - f0, tl, tsize, starts, freqs, vs, inv_omega);
            else if (tl == 0) big[atomicAdd(&counts[1], 1)] = (int)c;
        }
        for (int o = tsize / 2; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o, tsize);
        if (c < count && tl == 0) {  // own: the share of t's residue that first-step walks leave at t
            const int h = h_index[t];
            out[c] = pi0[t] + (own > 0.0 ? own * vs[t].r : 0.0) + acc + (h >= 0 ? est_h[h] : 0.0);
        }
    }
}
// the long start lists of gj_compute_ppr, a block each, added to what it wrote
extern "C" __global__ void gj_compute_big(const int* cand, const int* counts, const int* big,
        const long long* ip1, const int* starts, const long long* ip2, const int* freqs, const gj_vertex* vs,
        const double* inv_omega, double* out) {
    for (int i = blockIdx.x; i < counts[1]; i += gridDim.x) {  // block-uniform
        const int c = big[i], t = cand[c];
        const long long lo = ip1[t], f0 = ip2[t];
        double acc = gj_irw_sum(lo, ip1[t + 1], f0, ip2[t + 1] - f0, threadIdx.x, blockDim.x, starts, freqs,
                                vs, inv_omega);
        acc = gj_block_sum(acc);
        if (threadIdx.x == 0) out[c] += acc;
    }
}
"""
ESTIMATE_SOURCE = VERTEX_CUDA + SCAN_CUDA + ESTIMATE_KERNELS
FALLBACK_KERNEL = (
    MIX_CUDA
    + WALK_CUDA
    + r"""
extern "C" __global__ void gj_fallback_walks(const long long* indptr, const int* indices, const int* verts,
        const double* share, const long long* wptr, long long nv, unsigned long long key, double stop,
        double* est, double* returned) {
    long long total = wptr[nv], stride = (long long)gridDim.x * blockDim.x;
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < total; w += stride) {
        long long lo = 0, hi = nv;
        while (hi - lo > 1) { long long mid = (lo + hi) >> 1; if (wptr[mid] <= w) lo = mid; else hi = mid; }
        unsigned long long kw = gj_mix64(key + (unsigned long long)w * GJ_GOLDEN);
        long long t = gj_walk<int>(indptr, indices, verts[lo], kw, stop, 0);
        if (t >= 0) atomicAdd(&est[t], share[lo]); else atomicAdd(returned, share[lo]);
    }
}
"""
)

ESTIMATE = Kernel(
    ESTIMATE_SOURCE, ("gj_compute_ppr", "gj_compute_big"), defines=VERTEX_DEFINES, label="topk-estimate"
)


def compute_ppr_gpu(c: Candidates, ids, offset: int, tsize: int) -> None:
    """pi0 (+ the residue's own share) + IRW walk sums (+ H part) of the ``offset + ncand`` vertices
    listed in ``ids``, into ``c.est`` (``c`` is the round's ``_topk_gpu_bound.Candidates``; the candidate
    count stays on the device). With tiles (tsize > 1), start lists longer than ``BIG_STEPS`` steps of a
    tile are summed by a block each afterwards."""

    def make():
        a, p = c.index.arrays, c.push
        big_list = BIG_STEPS * tsize if tsize > 1 else np.iinfo(np.int64).max
        lists = (a["ip1"], a["starts"], a["ip2"], a["freqs"], p.state, c.constants.inv_omega)
        count = p.counts[6:]
        small = (
            ids,
            count,
            np.int32(offset),
            np.int32(tsize),
            np.int64(big_list),
            p.big,
            *lists,
            p.pi0,
            a["h_index"],
            c.est_h,
            np.float64(c.index.params.own_share),
            c.est,
        )
        big = (ids, count, p.big, *lists, c.est) if tsize > 1 else None
        return small, big

    small, big = c.args.get(("ppr", offset, tsize), make)
    ESTIMATE.get("gj_compute_ppr")((c.sm_blocks * 4,), (256,), small)
    if big is not None:
        ESTIMATE.get("gj_compute_big")((c.sm_blocks * 2,), (256,), big)


FALLBACK = Kernel(FALLBACK_KERNEL, ("gj_fallback_walks",), defines=MIX_DEFINES, label="topk-fallback")


def fallback_gpu(push: PushState, walks_per_mass: float, key: int):
    """Dense estimates from fresh walks: ceil(r(v) * walks_per_mass) from every v with residue (``push``
    is the query's ``_topk_gpu_push.PushState``)."""
    cp = import_cupy()
    verts = push.touched[: push.ntouched()]
    rv = push.r[verts]
    keep = rv > 0
    verts, rv = verts[keep], rv[keep]
    nv = cp.maximum(cp.ceil(rv * walks_per_mass), 1).astype(cp.int64)
    wptr = cp.zeros(verts.size + 1, dtype=cp.int64)
    cp.cumsum(nv, out=wptr[1:])
    est = push.pi0.copy()
    ret = cp.zeros(1, dtype=cp.float64)
    total = int(wptr[-1])
    index = push.index
    if total:
        g = index.graph
        grid = (max(1, min(push.sm_blocks * 8, (total + 255) // 256)),)
        FALLBACK.get("gj_fallback_walks")(
            grid,
            (256,),
            (
                g.indptr,
                g.indices,
                verts,
                rv / nv,
                wptr,
                np.int64(verts.size),
                np.uint64(key),
                np.float64(1.0 - index.params.alpha),
                est,
                ret,
            ),
        )
    est /= 1.0 - ret
    perm = index.perm  # ties (PPR 0 among them) by the ids of the graph the index was built from
    return (
        (cp.argsort(-est) if perm is None else cp.lexsort(cp.stack([perm.astype(cp.float64), -est]))),
        est,
        total,
    )
