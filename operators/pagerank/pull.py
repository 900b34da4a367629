"""PageRank pull kernel (node-centric, over in-edges) and its per-graph plan."""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.device import shared_memory_per_sm, sm_count
from operators._gpu.registry import Kernel
from operators.pagerank.kernels import COMMON_CUDA, variant

# Pull kernel tunables, tuned with benchmarks/tune_pagerank.py on the benchmark graphs (benchmarks/RESULTS.md,
# PageRank section): 1024-thread blocks, two per SM; clusters of 2 blocks, each caching 16,384 hot values
# (32,768 shared through distributed shared memory), rather than one block caching 24,576 or larger
# clusters.
TUNING = {"threads": 1024, "hot": 16384, "max_hot_bytes": 98304, "min_hot_share": 0.05, "cluster": 2}
# In-degree classes of the pull kernel: hubs split into WCHUNK-edge chunks, then vertices with a
# group of 32, 16, 8 or 1 lanes each (lower bounds below), then vertices with no edge at all.
HUB_MIN = 1024
CLASS_MIN = (128, 32, 8, 0)
WCHUNK = 1024  # in-edges of a hub per warp work item
# 64-bit edge offsets from here: a 32-bit offset stepping past the last edge must not wrap around
WIDE_EDGES = 2**31 - 1024

PULL_KERNEL = r"""
// Warps stride over warp-sized work items (no block barriers, no work counter). Items, in order:
// chunks of WCHUNK in-edges of hub vertices (the last chunk to finish completes the hub), then
// vertices in groups of G = 32, 16, 8 or 1 lanes by in-degree, 32 / G vertices at a time, PER_ITEM
// rounds per item. Vertices without any edge (when teleport and dangling are uniform) all take the
// same value: one thread computes it and their share of the error and dangling mass.
// The values of the `hot` first vertices (the hubs, once the graph is ordered by degree) are copied
// into shared memory so the gathers that hit them skip L2; streamed arrays are read evict-first.
#define PER_ITEM 4
constexpr int kUnroll = WEIGHTED ? 2 : 4;  // weighted loops need more registers; 32 per thread at most
template <int G> struct gj_lanes { static constexpr int value = G; };
#if CLUSTER > 1
#define GJ_CLUSTER_DIMS __cluster_dims__(CLUSTER, 1, 1)
#else
#define GJ_CLUSTER_DIMS
#endif
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) GJ_CLUSTER_DIMS gj_pagerank_pull(
        const long long* __restrict__ indptr, const IDX* __restrict__ indices, const float* __restrict__ w,
        const VAL* __restrict__ c_old, const int* __restrict__ order,
        const int* __restrict__ chunk_hub, const long long* __restrict__ chunk_start,
        const int* __restrict__ hub_vertex, const int* __restrict__ hub_chunks,
        double* __restrict__ hub_sum, unsigned int* __restrict__ hub_done, int hot, int items_hub,
        int n32, int n16, int n8, int n1, int n_iso, int off32, GJ_VERTEX_ARGS) {
    GJ_SKIP_IF_CONVERGED();
    extern __shared__ unsigned char gj_smem[];
    VAL* hot_c = reinterpret_cast<VAL*>(gj_smem);
    __shared__ double sh[32];
#if CLUSTER > 1
    const int base = (int)gj_cluster_rank() * HOT_SLICE;
    for (int i = threadIdx.x; i < HOT_SLICE && base + i < hot; i += THREADS) hot_c[i] = c_old[base + i];
    gj_cluster_sync();
#else
    for (int i = threadIdx.x; i < hot; i += THREADS) hot_c[i] = c_old[i];
    __syncthreads();
#endif
    double err = 0.0, dang = 0.0;
    const double dsum = acc_in[1];
    const int lane = threadIdx.x & 31;
    auto groups = [&](auto tag, int j, int count, int off) {
        constexpr int G = decltype(tag)::value;
        const int sub = lane & (G - 1);
        // the next round's vertex and row bounds are loaded before this round's edges (pipelining)
        int k = j * PER_ITEM * (32 / G) + lane / G;
        int v = k < count ? __ldcs(&order[off + k]) : -1;
        EIDX beg = v >= 0 ? (EIDX)__ldcs(&indptr[v]) : 0, end = v >= 0 ? (EIDX)__ldcs(&indptr[v + 1]) : 0;
#pragma unroll 1
        for (int r = 0; r < PER_ITEM; ++r) {
            const int k2 = k + 32 / G;
            const int v2 = (r + 1 < PER_ITEM && k2 < count) ? __ldcs(&order[off + k2]) : -1;
            const EIDX beg2 = v2 >= 0 ? (EIDX)__ldcs(&indptr[v2]) : 0;
            const EIDX end2 = v2 >= 0 ? (EIDX)__ldcs(&indptr[v2 + 1]) : 0;
            double s = 0.0;
#pragma unroll kUnroll
            for (EIDX e = beg + sub; e < end; e += G) s += GJ_CONTRIB(e);
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
            if (v >= 0 && sub == 0) GJ_FINISH(v, s);
            k = k2;
            v = v2;
            beg = beg2;
            end = end2;
        }
    };
    const int i32 = (n32 + PER_ITEM - 1) / PER_ITEM;
    const int i16 = (n16 + 2 * PER_ITEM - 1) / (2 * PER_ITEM);
    const int i8 = (n8 + 4 * PER_ITEM - 1) / (4 * PER_ITEM);
    const int i1 = (n1 + 32 * PER_ITEM - 1) / (32 * PER_ITEM);
    const int total = items_hub + i32 + i16 + i8 + i1;
    const int warps = gridDim.x * (THREADS / 32);
    for (int b = blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5); b < total; b += warps) {
        int j = b;
        if (j < items_hub) {
            const int h = chunk_hub[j];
            const int v = hub_vertex[h];
            const EIDX start = (EIDX)chunk_start[j];
            const EIDX end = (EIDX)min(chunk_start[j] + (long long)WCHUNK, indptr[v + 1]);
            double s = 0.0;
#pragma unroll kUnroll
            for (EIDX e = start + lane; e < end; e += 32) s += GJ_CONTRIB(e);
            for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
            if (lane == 0) {
                atomicAdd(&hub_sum[h], s);
                __threadfence();
                if (atomicAdd(&hub_done[h], 1u) == (unsigned int)(hub_chunks[h] - 1)) {
                    __threadfence();
                    const double total_s = atomicAdd(&hub_sum[h], 0.0);
                    hub_sum[h] = 0.0;
                    hub_done[h] = 0u;
                    GJ_FINISH(v, total_s);
                }
            }
        } else if ((j -= items_hub) < i32) {
            groups(gj_lanes<32>{}, j, n32, off32);
        } else if ((j -= i32) < i16) {
            groups(gj_lanes<16>{}, j, n16, off32 + n32);
        } else if ((j -= i16) < i8) {
            groups(gj_lanes<8>{}, j, n8, off32 + n32 + n16);
        } else {
            groups(gj_lanes<1>{}, j - i8, n1, off32 + n32 + n16 + n8);
        }
    }
    if (n_iso > 0 && blockIdx.x == 0 && threadIdx.x == 0) {  // same expression as gj_finish with s = 0
        const VAL xi = (VAL)(alpha * (0.0 + dsum * inv_n) + (1.0 - alpha) * inv_n);
        err += (double)n_iso * fabs((double)xi - acc_in[2]);
        dang += (double)n_iso * (double)xi;
        acc_out[2] = (double)xi;
    }
#if CLUSTER > 1
    gj_cluster_sync();  // no block may leave while the others still read its shared memory
#endif
    GJ_REDUCE_OUT();
}
"""


def pull_plan(indptr_t, out_degree, lo: int = 0, hi: int | None = None):
    """Vertices ``lo <= v < hi`` grouped by in-degree class (``order``), hub chunks, class sizes.

    ``indptr_t`` is the in-edge row pointer indexed by global vertex id (rows outside the range may be
    empty); cached with the graph, or built once per part of a partitioned graph.
    """
    cp = import_cupy()
    hi = indptr_t.size - 1 if hi is None else hi
    deg = cp.diff(indptr_t[lo : hi + 1])
    cls = cp.full(hi - lo, 5, dtype=cp.int8)  # 5: no in-edges and no out-edges
    cls[(deg > 0) | (out_degree[lo:hi] > 0)] = 4
    for k, bound in enumerate(CLASS_MIN[:-1]):
        cls[(deg >= bound) & (cls == 4)] = k + 1
    cls[deg >= HUB_MIN] = 0
    order = (cp.argsort(cls) + lo).astype(cp.int32)  # stable: ids ascending inside a class
    counts = cp.bincount(cls, minlength=6).get().astype(np.int64)
    hubs = order[: counts[0]]
    nch = (deg[hubs - lo].get() + WCHUNK - 1) // WCHUNK
    chunk_hub = np.repeat(np.arange(counts[0], dtype=np.int32), nch)
    first = (np.cumsum(nch) - nch).astype(np.int64)
    within = np.arange(chunk_hub.size, dtype=np.int64) - np.repeat(first, nch)
    return {
        "order": order,
        "chunk_hub": cp.asarray(chunk_hub),
        "chunk_start": cp.asarray(indptr_t[hubs].get()[chunk_hub] + within * WCHUNK),
        "hub_vertex": hubs.copy(),
        "hub_chunks": cp.asarray(nch.astype(np.int32)),
        "hub_sum": cp.zeros(max(1, int(counts[0])), dtype=cp.float64),
        "hub_done": cp.zeros(max(1, int(counts[0])), dtype=cp.uint32),
        "items_hub": int(chunk_hub.size),
        "counts": tuple(int(c) for c in counts),
        "isolated": order[int(counts[:5].sum()) :],
    }


def _hot_size(n: int, hot_out_edges, m: int, dtype, cluster: int) -> tuple[int, int]:
    """(hot vertices cached in shared memory, per-block slice): 0 when they hold few out-edges.

    ``hot_out_edges(h)`` counts the out-edges of vertices ``< h``: the gathers that would hit the cache.
    """
    slice_ = min(int(TUNING["hot"]), int(TUNING["max_hot_bytes"]) // np.dtype(dtype).itemsize)
    hot = min(slice_ * cluster, n)
    if hot <= 0 or m == 0:
        return 0, 0
    return (hot, slice_) if hot_out_edges(hot) / m >= TUNING["min_hot_share"] else (0, 0)


def persistent_pull(G, weighted, dtype, dummy, closed_form_isolated: bool):
    """The compiled pull kernel, its launch shape, the per-graph arguments and the isolated ids."""
    T = G.transpose()
    plan = G.derived("pagerank_pull_plan", lambda g: pull_plan(g.transpose().indptr, g.out_degree()))
    arrays = (T.indptr, T.indices, T.weights if weighted else None)
    hot_edges = lambda h: int(G.indptr[h])  # noqa: E731
    return pull_launch(arrays, plan, G.n, G.m, hot_edges, weighted, dtype, dummy, closed_form_isolated)


# variants compiled by the tests: every value and index type, weighted or not, without and with clusters
PULL = Kernel(
    COMMON_CUDA + PULL_KERNEL,
    ("gj_pagerank_pull",),
    defines={"WCHUNK": WCHUNK},
    variants=tuple(
        variant(dtype, weighted, idx, TUNING["threads"], idx == np.int64, cluster, 16384)
        for dtype in (np.float32, np.float64)
        for weighted in (False, True)
        for idx in (np.int32, np.int64)
        for cluster in (1, 8)
    ),
    label="pagerank-pull",
)


def pull_launch(arrays, plan, n, m_total, hot_out_edges, weighted, dtype, dummy, closed_form_isolated):
    """Compile and shape the pull kernel for in-edge ``arrays`` (indptr by global id, indices, weights)
    and their ``plan``; ``m_total`` and ``hot_out_edges`` size the shared-memory cache of hot values."""
    cp = import_cupy()
    threads = int(TUNING["threads"])
    indptr_t, indices_t, w_t = arrays
    m_local = int(indices_t.shape[0])
    cluster = int(TUNING["cluster"])
    hot, slice_ = _hot_size(n, hot_out_edges, m_total, dtype, cluster)
    cluster = cluster if hot else 1
    smem = (slice_ if cluster > 1 else hot) * dtype.itemsize
    defines = variant(
        dtype,
        weighted,
        indices_t.dtype,
        threads,
        wide_edges=m_local >= WIDE_EDGES,
        cluster=cluster,
        hot_slice=slice_,
    )
    kernel = PULL.get("gj_pagerank_pull", **defines)
    if smem:
        kernel.max_dynamic_shared_size_bytes = smem
    sms = sm_count()
    wide = (
        m_local >= WIDE_EDGES or indices_t.dtype == np.int64
    )  # 64-bit offsets: one block per SM (64 registers)
    per_sm = 1 if wide else min(2048 // threads, (shared_memory_per_sm() - 2048) // (smem + 1280))
    per_sm = max(1, per_sm)
    wt = w_t if weighted else dummy.astype(cp.float32)
    head = (indptr_t, indices_t, wt)
    plan_args = tuple(plan[k] for k in ("order", "chunk_hub", "chunk_start", "hub_vertex", "hub_chunks"))
    plan_args += (plan["hub_sum"], plan["hub_done"])
    _, n32, n16, n8, n1, n_iso = plan["counts"]
    if not closed_form_isolated:  # isolated vertices follow the lane class in `order`
        n1, n_iso = n1 + n_iso, 0
    sizes = tuple(np.int32(v) for v in (hot, plan["items_hub"], n32, n16, n8, n1, n_iso, plan["counts"][0]))
    isolated = plan["isolated"] if n_iso else None
    blocks = max(cluster, (sms * per_sm) // cluster * cluster)  # a whole number of clusters
    return kernel, (blocks,), (threads,), smem, (*head,), plan_args, sizes, isolated


def fill_isolated(x, isolated, value):
    """Vertices without edges were computed in closed form: write their common value."""
    if isolated is not None and isolated.size:
        x[isolated] = value.astype(x.dtype)
    return x
