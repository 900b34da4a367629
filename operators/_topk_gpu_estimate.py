"""GPU estimates of the top-k PPR query: IRW sums over candidates (Alg. 6) and the Monte-Carlo fallback
(Algorithm 3, lines 27-32); the bound reduction over H (Alg. 4) is ``_topk_gpu_bound``.
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy
from graphs._mix import MIX_CUDA

from ._irw import WALK_CUDA

ESTIMATE_KERNELS = r"""
// Alg. 6: a tile of TSIZE threads per listed vertex (tsize = 1: a thread per vertex); the list holds
// offset + *ncand vertices (the count stays on the device)
extern "C" __global__ void gj_compute_ppr(const int* cand, const int* ncand, int offset, int tsize,
        const long long* ip1, const int* starts, const long long* ip2, const int* freqs, const double* r,
        const double* inv_omega, const double* pi0, const int* h_index, const double* est_h, double* out) {
    const int tl = threadIdx.x % tsize, per_warp = 32 / tsize;
    const long long count = offset + (long long)*ncand;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const long long nwarps = (long long)gridDim.x * blockDim.x / 32;
    for (long long base = warp * per_warp; base < count; base += nwarps * per_warp) {  // warp-uniform
        long long c = base + (threadIdx.x & 31) / tsize;
        double acc = 0.0;
        int t = c < count ? cand[c] : 0;
        if (c < count) {
            long long lo = ip1[t], hi = ip1[t + 1], f0 = ip2[t], nf = ip2[t + 1] - f0;
            for (long long j = lo + tl; j < hi; j += tsize) {
                int v = starts[j];
                double rv = r[v];
                if (rv > 0.0) acc += rv * inv_omega[v] * (j - lo < nf ? (double)freqs[f0 + j - lo] : 1.0);
            }
        }
        for (int o = tsize / 2; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o, tsize);
        if (c < count && tl == 0) { int h = h_index[t]; out[c] = pi0[t] + acc + (h >= 0 ? est_h[h] : 0.0); }
    }
}
"""
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
        long long t = gj_walk<int>(indptr, indices, verts[lo], kw, stop);
        if (t >= 0) atomicAdd(&est[t], share[lo]); else atomicAdd(returned, share[lo]);
    }
}
"""
)


def compute_ppr_gpu(q, ids, offset: int, tsize: int) -> None:
    """pi0 + IRW walk sums (+ H part) of the ``offset + ncand`` vertices listed in ``ids``, into
    ``q.est`` (``q`` is the GPUQuery; the candidate count stays on the device)."""
    a = q.index.arrays
    get_kernel(ESTIMATE_KERNELS, "gj_compute_ppr")(
        (q.sm_blocks * 4,), (256,),
        (ids, q.counts[6:], np.int32(offset), np.int32(tsize), a["ip1"], a["starts"], a["ip2"], a["freqs"],
         q.r, q.inv_omega, q.pi0, a["h_index"], q.est_h, q.est),
    )  # fmt: skip


def fallback_gpu(q, walks_per_mass: float, key: int):
    """Dense estimates from fresh walks: ceil(r(v) * walks_per_mass) from every v with residue."""
    cp = import_cupy()
    verts = q.touched[: q.ntouched()]
    rv = q.r[verts]
    keep = rv > 0
    verts, rv = verts[keep], rv[keep]
    nv = cp.maximum(cp.ceil(rv * walks_per_mass), 1).astype(cp.int64)
    wptr = cp.zeros(verts.size + 1, dtype=cp.int64)
    cp.cumsum(nv, out=wptr[1:])
    est = q.pi0.copy()
    ret = cp.zeros(1, dtype=cp.float64)
    total = int(wptr[-1])
    if total:
        g = q.index.graph
        grid = (max(1, min(q.sm_blocks * 8, (total + 255) // 256)),)
        get_kernel(FALLBACK_KERNEL, "gj_fallback_walks")(
            grid, (256,),
            (g.indptr, g.indices, verts, rv / nv, wptr, np.int64(verts.size), np.uint64(key),
             np.float64(1.0 - q.index.params.alpha), est, ret),
        )  # fmt: skip
    est /= 1.0 - ret
    return cp.argsort(-est), est, total
