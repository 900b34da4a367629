"""CUDA kernels of single-source SimRank (ClipSim Sec. 4): warp-per-portion meeting walks with double
random seeds, and warp-per-row pulls for the hop vectors and the Horner sums.

The walks draw exactly what ``_simrank_cpu`` draws (see its module text), so both count the same
meets. A persistent grid of warps takes portions (a vertex and a range of its groups, laid out over
the compacted list of sampled vertices by ``_simrank_plan.portions``) from an atomic counter: a warp
that finishes early takes the next portion, which balances the load. All 32 lanes of a warp run one
group of 32 walk pairs: the stop/continue draw is the group's, so the lanes step together, and each
lane picks its in-neighbours from its own stream. Meets are summed over the warp and added to the
vertex's count with one atomic per portion.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from graphs._mix import LANE, MIX_CUDA, MIX_DEFINES
from operators._gpu.device import sm_count
from operators._gpu.registry import Kernel

SIMRANK_KERNEL = (
    MIX_CUDA
    + r"""
#define FULL 0xffffffffu

template <typename I>
__device__ __forceinline__ long long gj_sr_pick(const long long* indptr, const I* indices, long long x,
                                                unsigned long long r) {
    long long a = indptr[x];
    unsigned long long d = (unsigned long long)(indptr[x + 1] - a);
    return (long long)indices[a + (long long)(((r >> 32) * d) >> 32)];
}

template <typename I>
__device__ void gj_sr_meets(const long long* indptr, const I* indices, unsigned long long key,
                            unsigned long long cont, const long long* counts, const long long* pv,
                            const long long* pg0, const long long* pg1, long long portions,
                            unsigned long long* next, unsigned long long* meets) {
    const int lane = threadIdx.x & 31;
    while (true) {
        long long p = 0;
        if (lane == 0) p = (long long)atomicAdd(next, 1ULL);
        p = __shfl_sync(FULL, p, 0);
        if (p >= portions) return;
        const long long k = pv[p];
        const unsigned long long kk = gj_mix64(key + (unsigned long long)(k + 1) * GJ_GOLDEN);
        unsigned long long met = 0;
        for (long long g = pg0[p]; g < pg1[p]; ++g) {
            const unsigned long long gk = gj_mix64(kk + (unsigned long long)(g + 1) * GJ_GOLDEN);
            const unsigned long long lk = gj_mix64(gk ^ ((unsigned long long)(lane + 1) * LANE_KEY));
            long long u = 0, v = 0;
            bool alive = lane < counts[k] - g * 32;
            if (alive) {
                u = gj_sr_pick(indptr, indices, k, gj_rand_u64(lk, 0));
                v = gj_sr_pick(indptr, indices, k, gj_rand_u64(lk, 1));
                alive = u != v;
            }
            // the group's shared draw: every lane takes the same branch, so the warp steps together
            for (unsigned long long s = 1; __any_sync(FULL, alive) && (gj_rand_u64(gk, s) >> 11) < cont;
                 ++s) {
                if (!alive) continue;
                if (indptr[u + 1] == indptr[u] || indptr[v + 1] == indptr[v]) {
                    alive = false;
                    continue;
                }
                u = gj_sr_pick(indptr, indices, u, gj_rand_u64(lk, 2 * s));
                v = gj_sr_pick(indptr, indices, v, gj_rand_u64(lk, 2 * s + 1));
                if (u == v) {
                    met += 1;
                    alive = false;
                }
            }
        }
        for (int o = 16; o > 0; o >>= 1) met += __shfl_xor_sync(FULL, met, o);
        if (lane == 0 && met) atomicAdd(meets + k, met);
    }
}

// y[j] = sc * sum over the row j of x[col], divided by the row length when `mean`, plus
// diag[j] * add[j] * scale when `diag` is given; one warp per row.
template <typename I>
__device__ void gj_sr_pull(const long long* indptr, const I* indices, const double* x, int mean,
                           const double* diag, const double* add, double scale, double sc, long long n,
                           double* y) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long j = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; j < n; j += warps) {
        const long long a = indptr[j], b = indptr[j + 1];
        double acc = 0.0;
        for (long long e = a + lane; e < b; e += 32) acc += x[indices[e]];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL, acc, o);
        if (lane == 0) {
            double v = sc * acc;
            if (mean) v = b > a ? v / (double)(b - a) : 0.0;
            if (diag) v += diag[j] * add[j] * scale;
            y[j] = v;
        }
    }
}

#define GJ_SR_ENTRY(T, S)                                                                                    \
extern "C" __global__ void gj_sr_meets_##S(const long long* indptr, const T* indices,                        \
        unsigned long long key, unsigned long long cont, const long long* counts, const long long* pv,       \
        const long long* pg0, const long long* pg1, long long portions, unsigned long long* next,            \
        unsigned long long* meets) {                                                                         \
    gj_sr_meets<T>(indptr, indices, key, cont, counts, pv, pg0, pg1, portions, next, meets);                 \
}                                                                                                            \
extern "C" __global__ void gj_sr_pull_##S(const long long* indptr, const T* indices, const double* x,        \
        int mean, const double* diag, const double* add, double scale, double sc, long long n, double* y) {  \
    gj_sr_pull<T>(indptr, indices, x, mean, diag, add, scale, sc, n, y);                                     \
}
GJ_SR_ENTRY(int, i32)
GJ_SR_ENTRY(long long, i64)
"""
)


SIMRANK = Kernel(
    SIMRANK_KERNEL,
    tuple(f"gj_sr_{k}_{t}" for k in ("meets", "pull") for t in ("i32", "i64")),
    defines={**MIX_DEFINES, "LANE_KEY": f"0x{LANE:X}ULL"},
    label="simrank",
)


def _suffix(indices) -> str:
    return "i64" if indices.dtype == np.int64 else "i32"


def _pull(indptr, indices, x, out, *, sc, mean=False, diag=None, add=None, scale=0.0):
    n = indptr.size - 1
    sms = sm_count()
    blocks = int(max(1, min(-(-n // 8), sms * 32)))
    null = np.uint64(0)
    args = (
        indptr,
        indices,
        x,
        np.int32(mean),
        null if diag is None else diag,
        null if add is None else add,
        np.float64(scale),
        np.float64(sc),
        np.int64(n),
        out,
    )
    SIMRANK.get(f"gj_sr_pull_{_suffix(indices)}")((blocks,), (256,), args)


def hops(indptr, indices, in_degree, source: int, sc: float, L: int):
    """pi^l = (1 - sqrt c)(sqrt c P)^l e_source for l = 0..L, as rows of an (L+1, n) array."""
    cp = import_cupy()
    n = indptr.size - 1
    out = cp.zeros((L + 1, n), dtype=cp.float64)
    out[0, source] = 1.0 - sc
    inv = cp.where(in_degree > 0, 1.0 / cp.maximum(in_degree, 1), 0.0)
    for level in range(L):
        _pull(indptr, indices, out[level] * inv, out[level + 1], sc=sc)
    return out


def horner(in_indptr, in_indices, pis, diag, sc: float):
    """s^L of s^0 = D pi^L / (1 - sqrt c), s^l = sqrt c P^T s^(l-1) + D pi^(L-l) / (1 - sqrt c)."""
    L = pis.shape[0] - 1
    scale = 1.0 / (1.0 - sc)
    s = diag * pis[L] * scale
    nxt = s.copy()
    for level in range(1, L + 1):
        _pull(in_indptr, in_indices, s, nxt, sc=sc, mean=True, diag=diag, add=pis[L - level], scale=scale)
        s, nxt = nxt, s
    return s


def meets(in_indptr, in_indices, key, cont, counts, pv, pg0, pg1):
    """Meets per vertex, summed over the portions (vertex pv[p], groups pg0[p] .. pg1[p]-1)."""
    cp = import_cupy()
    out = cp.zeros(counts.size, dtype=cp.uint64)
    if pv.size == 0:
        return out.astype(cp.int64)
    sms = sm_count()
    warps = int(min(pv.size, sms * 64))
    blocks = -(-warps // 8)
    nxt = cp.zeros(1, dtype=cp.uint64)
    args = (
        in_indptr,
        in_indices,
        np.uint64(key),
        np.uint64(cont),
        counts,
        pv,
        pg0,
        pg1,
        np.int64(pv.size),
        nxt,
        out,
    )
    SIMRANK.get(f"gj_sr_meets_{_suffix(in_indices)}")((blocks,), (256,), args)
    return out.astype(cp.int64)
