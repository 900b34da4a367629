"""Binned PageRank on the GPU: the fill and sum kernels over the layout of ``_pagerank_binned``.

One iteration is two launches. Fill: a block per work item (a stretch of one chunk's edges) copies the
chunk's ``c`` into shared memory and writes each edge's contribution, 8 edges per thread step. Sum: a
block per work item (a stretch of one bin's segments) adds contributions into the bin's rows in shared
memory, then finishes them (``gj_finish``: new value, next ``c``, L1 change, dangling mass); a bin cut
into several items adds its partial rows into ``y_acc`` and the last of its blocks finishes them.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.device import l2_cache_bytes
from operators._gpu.registry import Kernel
from operators.pagerank.binned import TUNING, binned_order, build_bytes, kept_layout
from operators.pagerank.kernels import COMMON_CUDA, variant

FILL_THREADS, SUM_THREADS = 1024, 512

VALS_CUDA = r"""
#if VAL_IS_DOUBLE
typedef double2 gj_pair;  // 16-byte vector of values
#else
typedef float4 gj_pair;
#endif
constexpr int kPer = 16 / sizeof(VAL), kLoads = 8 / kPer;  // values per 16-byte load, loads per 8 edges
struct gj_vals { VAL v[8]; };
__device__ __forceinline__ gj_vals gj_load8(const VAL* p) {
    gj_vals r;
#pragma unroll
    for (int i = 0; i < kLoads; ++i)
        *reinterpret_cast<gj_pair*>(&r.v[i * kPer]) = __ldcs(reinterpret_cast<const gj_pair*>(p) + i);
    return r;
}
"""

FILL_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(THREADS) gj_binned_fill(const uint4* __restrict__ src,
        const float* __restrict__ w, VAL* __restrict__ val, const VAL* __restrict__ c_old,
        const int* __restrict__ item_chunk, const long long* __restrict__ item_lo,
        const long long* __restrict__ item_hi, int n, const double* __restrict__ acc_in, double threshold) {
    GJ_SKIP_IF_CONVERGED();
    extern __shared__ unsigned char gj_smem[];
    VAL* cs = reinterpret_cast<VAL*>(gj_smem);
    const long long base = (long long)item_chunk[blockIdx.x] << CHUNK_BITS;
    const int count = (int)min((long long)1 << CHUNK_BITS, (long long)n - base);
    for (int i = threadIdx.x; i < count; i += THREADS) cs[i] = c_old[base + i];
    __syncthreads();
    // each thread loads FILL_UNROLL vectors (THREADS apart) before it writes any: more loads in flight
    const long long hi = item_hi[blockIdx.x];
    for (long long j0 = item_lo[blockIdx.x] + threadIdx.x; j0 < hi; j0 += (long long)THREADS * FILL_UNROLL) {
        uint4 s[FILL_UNROLL];
#if WEIGHTED
        float4 w0[FILL_UNROLL], w1[FILL_UNROLL];
#endif
#pragma unroll
        for (int u = 0; u < FILL_UNROLL; ++u) {
            const long long j = j0 + (long long)u * THREADS;
            if (j < hi) {
                s[u] = __ldcs(&src[j]);
#if WEIGHTED
                w0[u] = __ldcs(reinterpret_cast<const float4*>(w) + 2 * j);
                w1[u] = __ldcs(reinterpret_cast<const float4*>(w) + 2 * j + 1);
#endif
            }
        }
#pragma unroll
        for (int u = 0; u < FILL_UNROLL; ++u) {
            const long long j = j0 + (long long)u * THREADS;
            if (j >= hi) break;
            const unsigned int q[4] = {s[u].x, s[u].y, s[u].z, s[u].w};
            gj_vals r;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                r.v[2 * i] = cs[q[i] & 0xffffu];
                r.v[2 * i + 1] = cs[q[i] >> 16];
            }
#if WEIGHTED
            const float wv[8] = {w0[u].x, w0[u].y, w0[u].z, w0[u].w, w1[u].x, w1[u].y, w1[u].z, w1[u].w};
#pragma unroll
            for (int i = 0; i < 8; ++i) r.v[i] *= (VAL)wv[i];
#endif
            gj_pair* out = reinterpret_cast<gj_pair*>(val + 8 * j);
#pragma unroll
            for (int i = 0; i < kLoads; ++i)
                __stcs(out + i, *reinterpret_cast<const gj_pair*>(&r.v[i * kPer]));
        }
    }
}
"""

SUM_KERNEL = r"""
// The bin's rows in shared memory: VAL, or with SUM_FIXED 64-bit fixed point (2**-56 a unit) held as two
// 32-bit words, low words first, then high words: a float's atomic add is a load and compare-and-store
// loop, a 32-bit integer's one instruction; the low word's carry goes into the high word. A row's sum is
// at most the mass of the iterated vector (a probability vector: 1), far below the 256 units it holds.
#if SUM_FIXED
typedef unsigned int gj_acc;
constexpr int kAccWords = 2;
__device__ __forceinline__ void gj_add_fixed(unsigned int* ys, unsigned int d, float x) {
    const unsigned long long v = __float2ull_rn(x * 72057594037927936.0f);
    const unsigned int lo = (unsigned int)v, old = atomicAdd(&ys[d], lo);
    const unsigned int hi = (unsigned int)(v >> 32) + (old + lo < old ? 1u : 0u);
    if (hi) atomicAdd(&ys[(1 << BIN_BITS) + d], hi);
}
#define GJ_ROW(r) ((double)(((unsigned long long)ys[(1 << BIN_BITS) + (r)] << 32) | ys[(r)]) \
                   * 1.3877787807814457e-17)
#define GJ_ROW_NONZERO(r) ((ys[(r)] | ys[(1 << BIN_BITS) + (r)]) != 0u)
#define GJ_ADD(d, x) if ((d) != 0xffffu) gj_add_fixed(ys, (d), (x))
#else
typedef VAL gj_acc;
constexpr int kAccWords = 1;
#define GJ_ROW(r) ((double)ys[(r)])
#define GJ_ROW_NONZERO(r) (ys[(r)] != (VAL)0)
// Adds one run of equal destinations (segments are sorted by destination) into the bin's rows.
#define GJ_ADD(d, x) if ((d) != 0xffffu) atomicAdd(&ys[(d)], (x))
#endif
extern "C" __global__ void __launch_bounds__(THREADS, SUM_BLOCKS) gj_binned_sum(const uint4* __restrict__ dst,
        const VAL* __restrict__ val, const int* __restrict__ pre, const int* __restrict__ segv, int chunks,
        const int* __restrict__ item_bin, const int* __restrict__ item_lo, const int* __restrict__ item_hi,
        const int* __restrict__ bin_items, VAL* __restrict__ y_acc, unsigned int* __restrict__ bin_done,
        int n, GJ_VERTEX_ARGS) {
    GJ_SKIP_IF_CONVERGED();
    extern __shared__ unsigned char gj_smem[];
    gj_acc* ys = reinterpret_cast<gj_acc*>(gj_smem);
    int* pre_s = reinterpret_cast<int*>(ys + kAccWords * (1 << BIN_BITS));
    int* seg_s = pre_s + chunks + 1;
    __shared__ double sh[32];
    __shared__ int last;
    const int b = item_bin[blockIdx.x], f1 = item_hi[blockIdx.x];
    const long long base = (long long)b << BIN_BITS;
    const int rows = (int)min((long long)1 << BIN_BITS, (long long)n - base);
    for (int i = threadIdx.x; i < kAccWords * (1 << BIN_BITS); i += THREADS) ys[i] = (gj_acc)0;
    for (int i = threadIdx.x; i <= chunks; i += THREADS) pre_s[i] = pre[(long long)b * (chunks + 1) + i];
    for (int i = threadIdx.x; i < chunks; i += THREADS) seg_s[i] = segv[(long long)b * chunks + i];
    __syncthreads();
    int k = 0;  // segment of the last vector found: positions only grow
    auto locate = [&](int f) {
        int lo = k, hi = chunks;
        while (hi - lo > 1) {
            const int mid = (lo + hi) >> 1;
            if (pre_s[mid] <= f) lo = mid; else hi = mid;
        }
        k = lo;
        return (long long)seg_s[k] + (f - pre_s[k]);
    };
    auto fetch = [&](int g, uint4& dd, gj_vals& xx) {  // vector g's destinations and contributions
        dd = make_uint4(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
        xx = {};
        if (g < f1) {
            const long long v = locate(g);
            dd = __ldcs(&dst[v]);
            xx = gj_load8(val + 8 * v);
        }
    };
    // each thread takes every THREADS-th vector of the bin's stretch; the next one is loaded before
    // this one is added
    int f = item_lo[blockIdx.x] + threadIdx.x;
    uint4 d;
    gj_vals x;
    fetch(f, d, x);
    while (f < f1) {
        const int fn = f + THREADS;
        uint4 dn;
        gj_vals xn;
        fetch(fn, dn, xn);
        const unsigned int q[8] = {d.x & 0xffffu, d.x >> 16, d.y & 0xffffu, d.y >> 16,
                                   d.z & 0xffffu, d.z >> 16, d.w & 0xffffu, d.w >> 16};
        unsigned int cur = q[0];
        VAL run = x.v[0];
#pragma unroll
        for (int i = 1; i < 8; ++i) {
            if (q[i] == cur) {
                run += x.v[i];
            } else {
                GJ_ADD(cur, run);
                cur = q[i];
                run = x.v[i];
            }
        }
        GJ_ADD(cur, run);
        f = fn;
        d = dn;
        x = xn;
    }
    __syncthreads();
    double err = 0.0, dang = 0.0;
    const double dsum = acc_in[1];
    if (bin_items[b] == 1) {
        for (int r = threadIdx.x; r < rows; r += THREADS) GJ_FINISH((int)(base + r), GJ_ROW(r));
    } else {
        for (int r = threadIdx.x; r < rows; r += THREADS)
            if (GJ_ROW_NONZERO(r)) atomicAdd(&y_acc[base + r], (VAL)GJ_ROW(r));
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(&bin_done[b], 1u) == (unsigned int)(bin_items[b] - 1);
        __syncthreads();
        if (last) {
            __threadfence();
            for (int r = threadIdx.x; r < rows; r += THREADS) {
                const VAL s = __ldcg(&y_acc[base + r]);
                y_acc[base + r] = (VAL)0;
                GJ_FINISH((int)(base + r), (double)s);
            }
            if (threadIdx.x == 0) bin_done[b] = 0u;
        }
    }
    GJ_REDUCE_OUT();
}
"""


def binned_variant(dtype, weighted: bool, threads: int) -> dict:
    """The defines of the fill (``FILL_THREADS``) or the sum kernel (``SUM_THREADS``) for values of
    ``dtype``: ``TUNING``'s bits and sum blocks for its size."""
    dtype = np.dtype(dtype)
    bits = TUNING[dtype.itemsize]
    return {
        **variant(dtype, weighted, np.int32, threads),
        "CHUNK_BITS": bits["chunk_bits"],
        "BIN_BITS": bits["bin_bits"],
        "SUM_BLOCKS": TUNING["sum_blocks"][dtype.itemsize],
        "FILL_UNROLL": TUNING["fill_unroll"],
        "SUM_FIXED": int(sum_fixed(dtype)),
    }


def sum_fixed(dtype) -> bool:
    """Whether the sum kernel for values of ``dtype`` adds in 64-bit fixed point (``TUNING['sum_fixed']``,
    float32 only): its shared rows are then two 4-byte words each."""
    return bool(TUNING["sum_fixed"]) and np.dtype(dtype) == np.float32


def _variants(threads: int) -> tuple[dict, ...]:
    return tuple(binned_variant(d, w, threads) for d in (np.float32, np.float64) for w in (False, True))


FILL = Kernel(
    COMMON_CUDA + VALS_CUDA + FILL_KERNEL,
    ("gj_binned_fill",),
    variants=_variants(FILL_THREADS),
    label="binned-fill",
)
SUM = Kernel(
    COMMON_CUDA + VALS_CUDA + SUM_KERNEL,
    ("gj_binned_sum",),
    variants=_variants(SUM_THREADS)
    + tuple(
        {**binned_variant(np.float32, w, SUM_THREADS), "SUM_FIXED": 1 - int(sum_fixed(np.float32))}
        for w in (0, 1)
    ),
    label="binned-sum",
)


def binned_fits(n: int, dtype) -> bool:
    """Whether the binned iteration takes ``n`` vertices (its segment table is held in shared memory)."""
    return -(-n // (1 << TUNING[np.dtype(dtype).itemsize]["chunk_bits"])) <= TUNING["max_chunks"]


def binned_step(G, weighted: bool, dtype):
    """``(step, perm)``: ``step(c_old, vertex_args)`` launches one binned iteration (layout kept with
    ``G``) over the ids renumbered by ``perm`` (``binned_order``; None: ``G``'s own ids)."""
    dtype = np.dtype(dtype)
    bits = TUNING[dtype.itemsize]
    check_fits(G.n, dtype)
    perm = binned_order(G)
    return layout_step(kept_layout(G, weighted, bits, perm), weighted, dtype), perm


def binned_pays(n: int, m: int, hot: float, dtype, weighted: bool, run_bytes: int | None = None) -> bool:
    """``method='auto'``'s rule for ``m`` edges among ``n`` vertices whose first ``TUNING['hot_vertices']``
    ids hold the share ``hot`` of the out-edges: binned in float32 once the value vector outgrows half
    the GPU's L2 (a quarter when ``hot`` is under ``order_below``: pull's shared-memory cache of the first
    ids then saves little), within ``binned_fits``, and when free memory holds the layout's build, or
    where the layout is kept with the graph already (``kept_run_bytes``), the ``run_bytes`` of a run."""
    if np.dtype(dtype) != np.float32 or m == 0 or not binned_fits(n, dtype):
        return False
    cp = import_cupy()
    l2 = l2_cache_bytes()
    if n * 4 <= (l2 // 2 if hot >= TUNING["order_below"] else l2 // 4):
        return False
    free = cp.cuda.runtime.memGetInfo()[0] + cp.get_default_memory_pool().free_bytes()
    return free >= (build_bytes(m, weighted) if run_bytes is None else run_bytes)


def check_fits(n: int, dtype) -> None:
    """ValueError unless ``binned_fits(n, dtype)``."""
    if not binned_fits(n, dtype):
        most = TUNING["max_chunks"] << TUNING[np.dtype(dtype).itemsize]["chunk_bits"]
        raise ValueError(
            f"method='binned' takes at most {most:,} vertices in {np.dtype(dtype).name}, the "
            f"graph has {n:,}: use method='pull'"
        )


def layout_step(lay: dict, weighted: bool, dtype, lo: int = 0):
    """``step(c_old, vertex_args)``: one binned iteration over the layout ``lay`` (built with
    ``TUNING``'s bits for ``dtype``), reading ``c_old`` over its ``n`` sources and finishing its ``rows``
    destinations, which are vertices ``lo .. lo + rows - 1`` of the vertex arrays in ``vertex_args``
    (``gj_finish``'s arguments in GJ_VERTEX_ARGS order; ``p`` and ``dw`` offset only where given)."""
    cp = import_cupy()
    dtype = np.dtype(dtype)
    bits = TUNING[dtype.itemsize]
    if (lay["chunk_bits"], lay["bin_bits"]) != (bits["chunk_bits"], bits["bin_bits"]):
        raise ValueError(f"the layout's chunk and bin bits are not those of {dtype.name}'s kernels")
    fill = FILL.get("gj_binned_fill", **binned_variant(dtype, weighted, FILL_THREADS))
    summ = SUM.get("gj_binned_sum", **binned_variant(dtype, weighted, SUM_THREADS))
    smem_fill = dtype.itemsize << bits["chunk_bits"]
    smem_sum = ((8 if sum_fixed(dtype) else dtype.itemsize) << bits["bin_bits"]) + 4 * (2 * lay["chunks"] + 1)
    fill.max_dynamic_shared_size_bytes = smem_fill
    summ.max_dynamic_shared_size_bytes = smem_sum
    val = cp.empty(lay["m_pad"], dtype=dtype)
    y_acc = cp.zeros(lay["rows"], dtype=dtype)
    done = cp.zeros(lay["bins"], dtype=cp.uint32)
    w = lay["w"] if weighted else cp.zeros(1, dtype=cp.float32)
    n_fill, n_sum = int(lay["fill_group"].size), int(lay["sum_group"].size)
    fill_head = (lay["src"], w, val)
    fill_items = (lay["fill_group"], lay["fill_lo"], lay["fill_hi"], np.int32(lay["n"]))
    sum_head = (lay["dst"], val, lay["pre"], lay["segv"], np.int32(lay["chunks"]), lay["sum_group"])
    sum_head += (lay["sum_lo"], lay["sum_hi"], lay["sum_count"], y_acc, done, np.int32(lay["rows"]))

    def step(c_old, vargs):
        # vargs: gj_finish's arguments in GJ_VERTEX_ARGS order (acc_in at 8, threshold at 10)
        if lo:  # the rows' own stretch of x_old, x_new, c_new, inv_out, and of p and dw where given
            own = [a[lo:] if i < 4 or vargs[i + 2] else a for i, a in enumerate(vargs[:6])]
            vargs = (*own, *vargs[6:])
        if n_fill:
            fill(
                (n_fill,),
                (FILL_THREADS,),
                (*fill_head, c_old, *fill_items, vargs[8], vargs[10]),
                shared_mem=smem_fill,
            )
        summ((n_sum,), (SUM_THREADS,), (*sum_head, *vargs), shared_mem=smem_sum)

    return step
