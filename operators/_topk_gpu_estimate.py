"""GPU estimates of the top-k PPR query: IRW sums over candidates (Alg. 6), the bound reduction over H
(Alg. 4) and the Monte-Carlo fallback (Algorithm 3, lines 27-32).
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy
from graphs._mix import MIX_CUDA

from ._irw import WALK_CUDA

LONG_LIST = 1024  # H lists longer than this are summed by a block each (``gj_bound_long``)
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
// Alg. 4: each touched start vertex adds its walks ending in H: a lane per vertex, the whole warp for
// lists longer than 32 entries; lists longer than long_list (hubs: up to |H| entries, the critical
// path for one warp) go to longv for gj_bound_long; est_h[nh] gets sum r(v) b_v, summed per warp first
extern "C" __global__ void gj_bound_reduction(const int* touched, const int* ntouched, const double* r,
        const double* inv_omega, const int* ret, const long long* hptr, const int* h_end, const int* h_freq,
        int nh, double* est_h, int long_list, int* longv, int* nlong) {
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const long long nt = *ntouched, stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31);
    for (long long base = first; base < nt; base += stride) {  // warp-uniform
        long long i = base + lane, lo = 0, hi = 0;
        double w = 0.0, back = 0.0;
        if (i < nt) {
            int v = touched[i];
            double rv = r[v];
            if (rv > 0.0) { w = rv * inv_omega[v]; back = w * ret[v]; lo = hptr[v]; hi = hptr[v + 1]; }
            if (hi - lo > long_list) { longv[atomicAdd(nlong, 1)] = v; hi = lo; }
        }
        const bool shared = hi - lo > 32;
        if (!shared) for (long long e = lo; e < hi; ++e) atomicAdd(&est_h[h_end[e]], w * h_freq[e]);
        for (unsigned many = __ballot_sync(full, shared); many; many &= many - 1) {
            const int src = __ffs(many) - 1;
            const long long l2 = __shfl_sync(full, lo, src), h2 = __shfl_sync(full, hi, src);
            const double w2 = __shfl_sync(full, w, src);
            for (long long e = l2 + lane; e < h2; e += 32) atomicAdd(&est_h[h_end[e]], w2 * h_freq[e]);
        }
        for (int o = 16; o > 0; o >>= 1) back += __shfl_down_sync(full, back, o);
        if (lane == 0 && back > 0.0) atomicAdd(&est_h[nh], back);
    }
}
// the long H lists, a block each
extern "C" __global__ void gj_bound_long(const int* longv, const int* nlong, const double* r,
        const double* inv_omega, const long long* hptr, const int* h_end, const int* h_freq, double* est_h) {
    for (int j = blockIdx.x; j < *nlong; j += gridDim.x) {
        const int v = longv[j];
        const double w = r[v] * inv_omega[v];
        for (long long e = hptr[v] + threadIdx.x; e < hptr[v + 1]; e += blockDim.x)
            atomicAdd(&est_h[h_end[e]], w * h_freq[e]);
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


def bound_reduction_gpu(q, long_list: int = LONG_LIST) -> None:
    """Walk parts of the H estimates into ``q.est_h[:nh]``, the returned mass sum r(v) b_v into
    ``q.est_h[nh]`` (``q.big`` lists the long lists, ``q.counts[7]`` counts them)."""
    a = q.index.arrays
    q.est_h.fill(0)
    get_kernel(ESTIMATE_KERNELS, "gj_bound_reduction")(
        (q.sm_blocks * 4,), (256,),
        (q.touched, q.counts[3:], q.r, q.inv_omega, a["ret"], a["hptr"], a["h_end"], a["h_freq"],
         np.int32(q.nh), q.est_h, np.int32(long_list), q.big, q.counts[7:]),
    )  # fmt: skip
    get_kernel(ESTIMATE_KERNELS, "gj_bound_long")(
        (q.sm_blocks * 4,), (256,),
        (q.big, q.counts[7:], q.r, q.inv_omega, a["hptr"], a["h_end"], a["h_freq"], q.est_h),
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
