"""PageRank on the GPU: node-centric pull and edge-centric push as CuPy RawKernels.

One power iteration is one launch (pull) or two (push: scatter, then finish). Everything per
vertex is fused into that launch: the new value ``alpha * (sum + dsum * dw) + (1 - alpha) * p``,
the next contribution ``x / outweight``, the L1 change and the dangling mass for the next
iteration (block reductions, then one double atomic per block into ``acc[it]``). The host reads
eight bytes per iteration to test convergence.
"""

from __future__ import annotations

import math

import numpy as np

from graphs._device import get_kernel, import_cupy, launch_config

THREADS = 256  # push kernels
# Pull kernel tunables, measured on the H100 with benchmarks/tune_pagerank.py: 1024-thread blocks, two
# per SM; clusters of 2 blocks each caching 16,384 hot values (32,768 shared through distributed shared
# memory) beat one block's 24,576 by 8% at R-MAT 24/25; clusters of 4 or 8 were 1.3-2.4x slower.
TUNING = {"threads": 1024, "hot": 16384, "max_hot_bytes": 98304, "min_hot_share": 0.05, "cluster": 2}
# In-degree classes of the pull kernel: hubs split into WCHUNK-edge chunks, then vertices with a
# group of 32, 16, 8 or 1 lanes each (lower bounds below), then vertices with no edge at all.
HUB_MIN = 1024
CLASS_MIN = (128, 32, 8, 0)
WCHUNK = 1024  # in-edges of a hub per warp work item (as in PULL_KERNEL)

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

PULL_KERNEL = r"""
// Warps stride over warp-sized work items (no block barriers, no work counter). Items, in order:
// chunks of WCHUNK in-edges of hub vertices (the last chunk to finish completes the hub), then
// vertices in groups of G = 32, 16, 8 or 1 lanes by in-degree, 32 / G vertices at a time, PER_ITEM
// rounds per item. Vertices without any edge (when teleport and dangling are uniform) all take the
// same value: one thread computes it and their share of the error and dangling mass.
// The values of the `hot` first vertices (the hubs, once the graph is ordered by degree) are copied
// into shared memory so the gathers that hit them skip L2; streamed arrays are read evict-first.
#define WCHUNK 1024
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

PUSH_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(THREADS) gj_pagerank_push(const IDX* __restrict__ rows,
        const IDX* __restrict__ indices, const float* __restrict__ w, const VAL* __restrict__ c_old,
        VAL* __restrict__ acc, long long m, const double* __restrict__ acc_in, double threshold) {
    GJ_SKIP_IF_CONVERGED();
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < m; e += stride) {
#if WEIGHTED
        const VAL val = c_old[rows[e]] * (VAL)w[e];
#else
        const VAL val = c_old[rows[e]];
#endif
        if (val != (VAL)0) atomicAdd(&acc[__ldcs(&indices[e])], val);
    }
}
extern "C" __global__ void __launch_bounds__(THREADS) gj_pagerank_push_finish(VAL* __restrict__ acc, int n,
        GJ_VERTEX_ARGS) {
    GJ_SKIP_IF_CONVERGED();
    __shared__ double sh[32];
    double err = 0.0, dang = 0.0;
    const double dsum = acc_in[1];
    for (int v = blockIdx.x * THREADS + threadIdx.x; v < n; v += gridDim.x * THREADS) {
        const double s = (double)acc[v];
        acc[v] = (VAL)0;
        GJ_FINISH(v, s);
    }
    GJ_REDUCE_OUT();
}
"""


def _source(body, dtype, weighted, idx, threads=THREADS, wide_edges=False, cluster=1, hot_slice=0) -> str:
    head = "".join(
        f"#define {k} {v}\n"
        for k, v in (
            ("VAL", "float" if dtype == np.float32 else "double"),
            ("IDX", "int" if idx == np.int32 else "long long"),
            ("EIDX", "long long" if wide_edges else "int"),  # edge offsets: 32-bit while m < 2**31
            ("VAL_IS_DOUBLE", int(dtype == np.float64)),
            ("CLUSTER", cluster),
            ("HOT_SLICE", max(1, hot_slice)),
            ("WEIGHTED", int(weighted)),
            ("THREADS", threads),
            ("MIN_BLOCKS", 1 if (wide_edges or idx == np.int64) else max(1, 2048 // threads)),
        )
    )
    return head + COMMON_CUDA + body


def kernel_sources() -> list[tuple[str, str, tuple[str, ...]]]:
    """Every kernel variant this module can compile: (label, source, kernel names)."""
    out = []
    threads = int(TUNING["threads"])
    for dtype in (np.float32, np.float64):
        for weighted in (False, True):
            for idx in (np.int32, np.int64):
                tag = f"{np.dtype(dtype).name}-{'w' if weighted else 'u'}-{np.dtype(idx).name}"
                wide = idx == np.int64
                for cluster in (1, 8):
                    src = _source(PULL_KERNEL, dtype, weighted, idx, threads, wide, cluster, 16384)
                    out.append((f"pull-c{cluster}-{tag}", src, ("gj_pagerank_pull",)))
                push = _source(PUSH_KERNEL, dtype, weighted, idx)
                out.append((f"push-{tag}", push, ("gj_pagerank_push", "gj_pagerank_push_finish")))
    return out


def pull_plan(indptr_t, indptr):
    """Vertices grouped by in-degree class (``order``), hub chunks, class sizes; cached with the graph."""
    cp = import_cupy()
    n = indptr_t.size - 1
    deg = cp.diff(indptr_t)
    cls = cp.full(n, 5, dtype=cp.int8)  # 5: no in-edges and no out-edges
    cls[(deg > 0) | (cp.diff(indptr) > 0)] = 4
    for k, lo in enumerate(CLASS_MIN[:-1]):
        cls[(deg >= lo) & (cls == 4)] = k + 1
    cls[deg >= HUB_MIN] = 0
    order = cp.argsort(cls).astype(cp.int32)  # stable: ids ascending inside a class
    counts = cp.bincount(cls, minlength=6).get().astype(np.int64)
    hubs = order[: counts[0]]
    nch = (deg[hubs].get() + WCHUNK - 1) // WCHUNK
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


def _hot_size(indptr, m: int, dtype, cluster: int) -> tuple[int, int]:
    """(hot vertices cached in shared memory, per-block slice): 0 when they hold few out-edges."""
    n = indptr.size - 1
    slice_ = min(int(TUNING["hot"]), int(TUNING["max_hot_bytes"]) // np.dtype(dtype).itemsize)
    hot = min(slice_ * cluster, n)
    if hot <= 0 or m == 0:
        return 0, 0
    share = int(indptr[hot]) / m  # gathers that hit vertices < hot: their out-edges
    return (hot, slice_) if share >= TUNING["min_hot_share"] else (0, 0)


def _persistent_pull(G, weighted, dtype, dummy, closed_form_isolated: bool):
    """The compiled pull kernel, its launch shape, the per-graph arguments and the isolated ids."""
    cp = import_cupy()
    threads = int(TUNING["threads"])
    T = G.transpose()
    plan = G.derived("pagerank_pull_plan", lambda g: pull_plan(g.transpose().indptr, g.indptr))
    cluster = int(TUNING["cluster"])
    hot, slice_ = _hot_size(G.indptr, G.m, dtype, cluster)
    cluster = cluster if hot else 1
    smem = (slice_ if cluster > 1 else hot) * dtype.itemsize
    source = _source(
        PULL_KERNEL,
        dtype,
        weighted,
        T.indices.dtype,
        threads,
        wide_edges=G.m >= 2**31,
        cluster=cluster,
        hot_slice=slice_,
    )
    kernel = get_kernel(source, "gj_pagerank_pull")
    if smem:
        kernel.max_dynamic_shared_size_bytes = smem
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    wide = G.m >= 2**31 or T.indices.dtype == np.int64  # 64-bit offsets: one block per SM (64 registers)
    per_sm = (
        1
        if wide
        else min(
            2048 // threads, (dev.attributes["MaxSharedMemoryPerMultiprocessor"] - 2048) // (smem + 1280)
        )
    )
    per_sm = max(1, per_sm)
    wt = T.weights if weighted else dummy.astype(cp.float32)
    head = (T.indptr, T.indices, wt)
    plan_args = tuple(plan[k] for k in ("order", "chunk_hub", "chunk_start", "hub_vertex", "hub_chunks"))
    plan_args += (plan["hub_sum"], plan["hub_done"])
    _, n32, n16, n8, n1, n_iso = plan["counts"]
    if not closed_form_isolated:  # isolated vertices follow the lane class in `order`
        n1, n_iso = n1 + n_iso, 0
    sizes = tuple(np.int32(v) for v in (hot, plan["items_hub"], n32, n16, n8, n1, n_iso, plan["counts"][0]))
    isolated = plan["isolated"] if n_iso else None
    blocks = max(cluster, (sms * per_sm) // cluster * cluster)  # a whole number of clusters
    return kernel, (blocks,), (threads,), smem, (*head,), plan_args, sizes, isolated


def pagerank_gpu(G, *, method, alpha, x0, p, dw, inv_out, weighted, max_iter, threshold, dtype):
    """Run the power iteration on the GPU; returns ``(x, iterations, last_error)``."""
    cp = import_cupy()
    n = G.n
    dtype = np.dtype(dtype)
    start = cp.cuda.Event()
    start.record()
    vec = {k: (None if a is None else cp.asarray(a, dtype=dtype)) for k, a in (("p", p), ("dw", dw))}
    inv = cp.asarray(inv_out, dtype=dtype)
    dummy = cp.zeros(1, dtype=dtype)
    x_old = cp.full(n, 1.0 / n, dtype=dtype) if x0 is None else cp.asarray(x0, dtype=dtype)
    x_new = cp.empty(n, dtype=dtype)
    c_old, c_new = x_old * inv, cp.empty(n, dtype=dtype)
    acc = cp.zeros(
        (max_iter + 1, 3), dtype=cp.float64
    )  # per iteration: L1 change, dangling mass, isolated value
    acc[0, 1] = cp.where(inv == 0, x_old.astype(cp.float64), 0.0).sum()
    acc[0, 2] = float(x_old[0]) if n else 0.0
    has_p, has_dw = vec["p"] is not None, vec["dw"] is not None
    pv, dwv = (vec["p"] if has_p else dummy), (vec["dw"] if has_dw else dummy)
    tail = (np.int32(has_p), np.int32(has_dw))
    thr = np.float64(threshold)
    scal = (np.float64(alpha), np.float64(1.0 / n))
    isolated = None
    if method == "pull":
        uniform = x0 is None and p is None and dw is None
        kernel, grid, block, smem, head, plan_args, sizes, isolated = _persistent_pull(
            G, weighted, dtype, dummy, uniform
        )
    else:
        src = _source(PUSH_KERNEL, dtype, weighted, G.indices.dtype)
        scatter, finish = get_kernel(src, "gj_pagerank_push"), get_kernel(src, "gj_pagerank_push_finish")
        rows, _, _ = G.edges()
        w = G.weights if weighted else dummy.astype(cp.float32)
        accv = cp.zeros(n, dtype=dtype)
        egrid, _ = launch_config(G.m, THREADS, max_blocks=132 * 32)
        vgrid, _ = launch_config(n, THREADS, max_blocks=132 * 16)
    acc[0, 0] = math.inf  # "error before the first iteration": never converged
    bufs_x, bufs_c = (x_old, x_new), (c_old, c_new)
    loop = cp.cuda.Event()
    loop.record()
    it, batch = 0, 1
    while it < max_iter:
        stop = min(max_iter, it + batch)
        for k in range(it, stop):  # iteration k reads buffer k % 2 and writes the other one
            xo, xn, co, cn = bufs_x[k % 2], bufs_x[1 - k % 2], bufs_c[k % 2], bufs_c[1 - k % 2]
            vargs = (xo, xn, cn, inv, pv, dwv, *tail, acc[k], acc[k + 1], thr, *scal)
            if method == "pull":
                args = (*head, co, *plan_args, *sizes, *vargs)
                kernel(grid, block, args, shared_mem=smem)
            else:
                scatter(egrid, (THREADS,), (rows, G.indices, w, co, accv, np.int64(G.m), acc[k], thr))
                finish(vgrid, (THREADS,), (accv, np.int32(n), *vargs))
        errs = acc[it + 1 : stop + 1, 0].get()  # one synchronisation per batch
        done = np.flatnonzero(errs < threshold)
        if done.size:
            k = it + int(done[0])  # the first converged iteration; later launches were no-ops
            x = _fill_isolated(bufs_x[1 - k % 2], isolated, acc[k + 1, 2])
            return x, k + 1, float(errs[done[0]]), _timings(start, loop, stop)
        it, batch = stop, min(2 * batch, 16)
    x = _fill_isolated(bufs_x[max_iter % 2], isolated, acc[max_iter, 2])
    return x, max_iter, float(errs[-1]), _timings(start, loop, max_iter)


def _fill_isolated(x, isolated, value):
    """Vertices without edges were computed in closed form: write their common value."""
    if isolated is not None and isolated.size:
        x[isolated] = value.astype(x.dtype)
    return x


def _timings(start, loop, launched: int) -> dict:
    """Seconds of set-up and of the iteration loop, from CUDA events (the loop has synchronised)."""
    cp = import_cupy()
    end = cp.cuda.Event()
    end.record()
    end.synchronize()
    return {
        "setup_s": cp.cuda.get_elapsed_time(start, loop) / 1e3,
        "loop_s": cp.cuda.get_elapsed_time(loop, end) / 1e3,
        "launched": launched,
    }
