"""CUDA code shared by the PageRank kernels, and the defines that select one variant of them.

Every kernel fuses the per-vertex work of an iteration: the new value
``alpha * (sum + dsum * dw) + (1 - alpha) * p``, the next contribution ``x / outweight``, the L1 change
and the dangling mass (block reductions, then one double atomic per block into the iteration's row
of ``acc``: L1 change, dangling mass, value of the vertices without edges).
"""

from __future__ import annotations

import numpy as np

COMMON_CUDA = r"""
__device__ __forceinline__ double gj_block_sum(double v, double* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    double r = 0.0;
    if (wid == 0) {
        r = lane < (THREADS >> 5) ? sh[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) r += __shfl_down_sync(0xffffffffu, r, o);
    }
    return r;  // meaningful in thread 0
}
__device__ __forceinline__ void gj_finish(int v, double s, const VAL* __restrict__ x_old,
        VAL* __restrict__ x_new,
        VAL* __restrict__ c_new, const VAL* __restrict__ inv_out, const VAL* __restrict__ p,
        const VAL* __restrict__ dw, int has_p, int has_dw, double dsum, double alpha, double inv_n,
        double& err, double& dang) {
    const double pv = has_p ? (double)__ldcs(&p[v]) : inv_n;
    const double dv = has_dw ? (double)__ldcs(&dw[v]) : pv;
    const VAL out = (VAL)(alpha * (s + dsum * dv) + (1.0 - alpha) * pv);
    const VAL io = __ldcs(&inv_out[v]);
    x_new[v] = out;
    c_new[v] = out * io;
    err += fabs((double)out - (double)__ldcs(&x_old[v]));
    if (io == (VAL)0) dang += (double)out;
}
#if CLUSTER > 1
// Thread-block clusters: block r of a cluster holds hot values [r * HOT_SLICE, (r + 1) * HOT_SLICE) and
// the others read them through distributed shared memory (mapa + ld.shared::cluster).
__device__ __forceinline__ unsigned gj_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void gj_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ double gj_dsmem(const VAL* local, unsigned rank) {
    unsigned addr = (unsigned)__cvta_generic_to_shared(local), remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
#if VAL_IS_DOUBLE
    double v;
    asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(remote));
#else
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote));
#endif
    return (double)v;
}
__device__ __forceinline__ double gj_gather(IDX u, const VAL* __restrict__ c_old, const VAL* hot_c, int hot) {
    if (u < (IDX)hot) return gj_dsmem(hot_c + (unsigned)u % HOT_SLICE, (unsigned)u / HOT_SLICE);
    return (double)__ldg(&c_old[u]);
}
#else
__device__ __forceinline__ double gj_gather(IDX u, const VAL* __restrict__ c_old, const VAL* hot_c, int hot) {
    return (double)(u < (IDX)hot ? hot_c[u] : __ldg(&c_old[u]));
}
#endif
#if WEIGHTED
#define GJ_CONTRIB(e) (gj_gather(__ldcs(&indices[e]), c_old, hot_c, hot) * (double)__ldcs(&w[e]))
#else
#define GJ_CONTRIB(e) (gj_gather(__ldcs(&indices[e]), c_old, hot_c, hot))
#endif
// An iteration whose predecessor already converged does nothing: the host can launch a batch of
// iterations and read their errors once, and the converged vector stays in its buffer.
#define GJ_SKIP_IF_CONVERGED() if (acc_in[0] < threshold) return;
#define GJ_VERTEX_ARGS const VAL* __restrict__ x_old, VAL* __restrict__ x_new, \
    VAL* __restrict__ c_new, const VAL* __restrict__ inv_out, const VAL* __restrict__ p, \
    const VAL* __restrict__ dw, int has_p, int has_dw, \
    const double* __restrict__ acc_in, double* __restrict__ acc_out, double threshold, \
    double alpha, double inv_n
#define GJ_FINISH(v, s) gj_finish((v), (s), x_old, x_new, c_new, inv_out, p, dw, has_p, has_dw, \
    dsum, alpha, inv_n, err, dang)
#define GJ_REDUCE_OUT() { double e2 = gj_block_sum(err, sh); double d2 = gj_block_sum(dang, sh); \
    if (threadIdx.x == 0) { atomicAdd(&acc_out[0], e2); atomicAdd(&acc_out[1], d2); } }
"""


def variant(dtype, weighted, idx, threads=256, wide_edges=False, cluster=1, hot_slice=0) -> dict:
    """The defines of one variant of a kernel whose source starts with ``COMMON_CUDA``."""
    return {
        "VAL": "float" if dtype == np.float32 else "double",
        "IDX": "int" if idx == np.int32 else "long long",
        "EIDX": "long long" if wide_edges else "int",  # edge offsets: 32-bit while m < 2**31
        "VAL_IS_DOUBLE": int(dtype == np.float64),
        "CLUSTER": cluster,
        "HOT_SLICE": max(1, hot_slice),
        "WEIGHTED": int(weighted),
        "THREADS": threads,
        "MIN_BLOCKS": 1 if (wide_edges or idx == np.int64) else max(1, 2048 // threads),
    }
