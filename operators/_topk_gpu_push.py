"""GPU forward push of the top-k PPR query (ParallelAFP, Alg. 2), in two schedules.

Both claim a frontier vertex's residue (atomicExch) and add alpha r(u) / d_out(u) to each
out-neighbour with atomicAdd; a vertex joins the next frontier once, guarded by bit 1 of ``mark``
(bit 2 = touched: listed in ``touched``, so every reset and scan costs O(touched), not O(n)).
List appends are warp-aggregated: one atomicAdd per group of lanes appending together.

- ``push_frontiers``: the paper's schedule (Sec. 4), a launch per frontier: tiles of TSIZE threads
  balanced inside each block by a prefix sum over ceil(d_out / TSIZE) (Alg. 5), a block per
  vertex of more than BIG_DEGREE out-edges, or a thread per vertex (``tiling=False``); the host
  reads the frontier size every LAUNCHES launches.
- ``push_persistent``: one cooperative launch runs every frontier of the round. Per frontier, each
  thread claims a contiguous slice of it, a grid-wide prefix sum over the out-degrees numbers the
  frontier's edges, and each warp takes chunks of consecutive edges, finding the frontier vertex
  whose range holds its first edge by binary search and the others by stepping ahead: a hub's edges
  spread over every SM, and a small frontier costs three grid barriers rather than a launch and a
  host read.
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy

TSIZE = 8
BIG_DEGREE = 8192
THREADS = 256
LAUNCHES = 8  # frontier launches between two host reads of the frontier size (``push_frontiers``)

PUSH_DEVICE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define GJ_T 256
__device__ __forceinline__ void gj_append(int* list, int* count, int value) {
    cg::coalesced_group g = cg::coalesced_threads();
    int base = 0;
    if (g.thread_rank() == 0) base = atomicAdd(count, (int)g.size());
    list[g.shfl(base, 0) + (int)g.thread_rank()] = value;
}
__device__ __forceinline__ void gj_push_one(int w, double inc, double* r, const double* thr, double rmax,
        int* mark, int* touched, int* ntouched, int* next, int* ncount) {
    double now = atomicAdd(&r[w], inc) + inc;
    int m = *((volatile int*)&mark[w]);
    if (!(m & 1) && now > thr[w] * rmax) {
        int old = atomicOr(&mark[w], 3);
        if (!(old & 1)) gj_append(next, ncount, w);
        if (!(old & 2)) gj_append(touched, ntouched, w);
    } else if (!(m & 2)) {
        if (!(atomicOr(&mark[w], 2) & 2)) gj_append(touched, ntouched, w);
    }
}
// claim frontier vertex u: its reserve grows, returns alpha * r(u) / d_out; a dangling vertex's share
// goes to s, or to *dangling when given (added to s once every claim of the frontier is done)
__device__ __forceinline__ double gj_claim(int u, int s, double alpha, double* r, double* pi0, int* mark,
        const long long* indptr, const double* thr, double rmax, int* touched, int* ntouched,
        int* next, int* ncount, long long* deg, double* dangling = nullptr) {
    atomicAnd(&mark[u], ~1);
    double ru = __longlong_as_double((long long)atomicExch((unsigned long long*)&r[u], 0ULL));
    pi0[u] += (1.0 - alpha) * ru;
    *deg = indptr[u + 1] - indptr[u];
    if (*deg == 0) {
        if (dangling) atomicAdd(dangling, alpha * ru);
        else gj_push_one(s, alpha * ru, r, thr, rmax, mark, touched, ntouched, next, ncount);
        return 0.0;
    }
    return alpha * ru / (double)*deg;
}
// touched vertices above their threshold join the frontier (a round's first frontier)
__device__ __forceinline__ void gj_regenerate(long long i, const int* touched, const double* r,
        const double* thr, double rmax, int* mark, int* next, int* ncount) {
    int u = touched[i];
    if (r[u] > thr[u] * rmax && !(atomicOr(&mark[u], 1) & 1)) gj_append(next, ncount, u);
}
"""

FRONTIER_CUDA = r"""
#define GJ_PUSH_ARGS const long long* indptr, const int* indices, const double* thr, double rmax, int s, \
    double alpha, double* r, double* pi0, int* mark, int* touched, int* ntouched, const int* front, \
    const int* fcount, int* next, int* ncount, int* zero_count, int* big, double* bigval, int* nbig, \
    int* zero_big, unsigned long long* pushes
#define GJ_PUSH_REST r, thr, rmax, mark, touched, ntouched, next, ncount

extern "C" __global__ void gj_afp_push_tiles(GJ_PUSH_ARGS) {
    __shared__ long long s_start[GJ_T];
    __shared__ int s_deg[GJ_T];
    __shared__ double s_val[GJ_T];
    __shared__ int s_scan[GJ_T + 1];
    __shared__ int s_warp[GJ_T / 32];
    const int count = *fcount, lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (blockIdx.x == 0 && threadIdx.x == 0) { *zero_count = 0; *zero_big = 0; *pushes += count; }
    for (int base = blockIdx.x * GJ_T; base < count; base += gridDim.x * GJ_T) {
        int i = base + threadIdx.x, tiles = 0;
        if (i < count) {
            int u = front[i];
            long long d;
            double val = gj_claim(u, s, alpha, r, pi0, mark, indptr, thr, rmax, touched, ntouched, next,
                                  ncount, &d);
            if (d > BIG_DEGREE) {
                int j = atomicAdd(nbig, 1);
                big[j] = u; bigval[j] = val;
            } else if (d > 0) {
                s_start[threadIdx.x] = indptr[u]; s_deg[threadIdx.x] = (int)d; s_val[threadIdx.x] = val;
                tiles = (int)((d + TSIZE - 1) / TSIZE);
            }
        }
        int x = tiles;  // block-wide exclusive scan of the tile counts
        for (int o = 1; o < 32; o <<= 1) { int y = __shfl_up_sync(0xffffffffu, x, o); if (lane >= o) x += y; }
        if (lane == 31) s_warp[wid] = x;
        __syncthreads();
        if (wid == 0) {
            int w = lane < GJ_T / 32 ? s_warp[lane] : 0;
            for (int o = 1; o < 32; o <<= 1) {
                int y = __shfl_up_sync(0xffffffffu, w, o);
                if (lane >= o) w += y;
            }
            if (lane < GJ_T / 32) s_warp[lane] = w;
        }
        __syncthreads();
        s_scan[threadIdx.x] = x - tiles + (wid ? s_warp[wid - 1] : 0);
        if (threadIdx.x == GJ_T - 1) s_scan[GJ_T] = s_scan[threadIdx.x] + tiles;
        __syncthreads();
        const int total = s_scan[GJ_T], tl = threadIdx.x % TSIZE;
        for (int tile = threadIdx.x / TSIZE; tile < total; tile += GJ_T / TSIZE) {
            int lo = 0, hi = GJ_T;  // owner: last o with s_scan[o] <= tile
            while (hi - lo > 1) {
                int mid = (lo + hi) >> 1;
                if (s_scan[mid] <= tile) lo = mid; else hi = mid;
            }
            int e = (tile - s_scan[lo]) * TSIZE + tl;
            if (e < s_deg[lo]) gj_push_one(indices[s_start[lo] + e], s_val[lo], GJ_PUSH_REST);
        }
        __syncthreads();
    }
}

extern "C" __global__ void gj_afp_push_threads(GJ_PUSH_ARGS) {
    const int count = *fcount;
    if (blockIdx.x == 0 && threadIdx.x == 0) { *zero_count = 0; *zero_big = 0; *pushes += count; }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        int u = front[i];
        long long d;
        double val = gj_claim(u, s, alpha, r, pi0, mark, indptr, thr, rmax, touched, ntouched, next, ncount,
                              &d);
        for (long long e = indptr[u]; e < indptr[u] + d; ++e) gj_push_one(indices[e], val, GJ_PUSH_REST);
    }
}

extern "C" __global__ void gj_afp_push_big(GJ_PUSH_ARGS) {
    for (int b = blockIdx.x; b < *nbig; b += gridDim.x) {
        int u = big[b];
        double val = bigval[b];
        for (long long e = indptr[u] + threadIdx.x; e < indptr[u + 1]; e += blockDim.x)
            gj_push_one(indices[e], val, GJ_PUSH_REST);
    }
}

extern "C" __global__ void gj_afp_frontier(const int* touched, const int* ntouched, const double* r,
        const double* thr, double rmax, int* mark, int* next, int* ncount) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < *ntouched; i += gridDim.x * blockDim.x)
        gj_regenerate(i, touched, r, thr, rmax, mark, next, ncount);
}
"""
FRONTIER_KERNELS = f"#define TSIZE {TSIZE}\n#define BIG_DEGREE {BIG_DEGREE}\n" + PUSH_DEVICE + FRONTIER_CUDA


def push_frontiers(q, rmax: float, adaptive: bool, tiling: bool) -> None:
    """The round's push, a launch per frontier (``q`` is the GPUQuery)."""
    g, thr, c = q.index.graph, q.thr[adaptive], q.counts

    def kernel(name):
        return get_kernel(FRONTIER_KERNELS, name)

    grid = (q.sm_blocks * 4,)
    c[:3] = 0
    c[4:6] = 0
    args = (q.touched, c[3:], q.r, thr, rmax, q.mark, q.front[0], c)
    kernel("gj_afp_frontier")(grid, (THREADS,), args)
    push = kernel("gj_afp_push_tiles" if tiling else "gj_afp_push_threads")
    i = 0
    while int(c[i % 3]):  # a host sync per LAUNCHES iterations; empty frontiers cost a launch
        for _ in range(LAUNCHES):
            args = (
                g.indptr, g.indices, thr, rmax, np.int32(q.s), np.float64(q.index.params.alpha), q.r, q.pi0,
                q.mark, q.touched, c[3:], q.front[i % 2], c[i % 3 :], q.front[(i + 1) % 2], c[(i + 1) % 3 :],
                c[(i + 2) % 3 :], q.big, q.bigval, c[4 + i % 2 :], c[4 + (i + 1) % 2 :], q.stats,
            )  # fmt: skip
            push(grid, (THREADS,), args)
            if tiling and q.has_big:
                kernel("gj_afp_push_big")((q.sm_blocks * 2,), (THREADS,), args)
            i += 1
    q.launches += i


PERSISTENT_CUDA = r"""
__device__ __forceinline__ long long gj_warp_incl(long long x) {
    const int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        long long y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}
// exclusive block-wide prefix sum of x; *total gets the block's sum
__device__ __forceinline__ long long gj_block_scan(long long x, long long* total) {
    __shared__ long long s_warp[GJ_T / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    long long incl = gj_warp_incl(x);
    if (lane == 31) s_warp[wid] = incl;
    __syncthreads();
    if (wid == 0) {
        long long w = gj_warp_incl(lane < GJ_T / 32 ? s_warp[lane] : 0);
        if (lane < GJ_T / 32) s_warp[lane] = w;
    }
    __syncthreads();
    long long excl = incl - x + (wid ? s_warp[wid - 1] : 0);
    *total = s_warp[GJ_T / 32 - 1];
    __syncthreads();
    return excl;
}

// Every frontier of one round in one cooperative launch (grid-wide barriers between the steps).
// fcount[0..1]: the two frontiers' sizes; stats[0..2] += pushes, frontiers, edges.
extern "C" __global__ void __launch_bounds__(GJ_T, 4) gj_afp_push_persistent(const long long* indptr,
        const int* indices, const double* thr, double rmax, int s, double alpha, double* r, double* pi0,
        int* mark, int* touched, int* ntouched, int* front, long long n, int* fcount, double* val,
        long long* off, long long* shift, long long* bsum, double* dangling, unsigned long long* stats) {
    cg::grid_group grid = cg::this_grid();
    const long long nthreads = (long long)gridDim.x * GJ_T, tid = (long long)blockIdx.x * GJ_T + threadIdx.x;
    if (tid == 0) fcount[0] = fcount[1] = 0;
    grid.sync();
    const int nt0 = *ntouched;
    for (long long i = tid; i < nt0; i += nthreads)
        gj_regenerate(i, touched, r, thr, rmax, mark, front, fcount);
    grid.sync();
    unsigned long long pushes = 0, frontiers = 0, edge_count = 0;
    for (int cur = 0;; cur ^= 1) {
        const int F = *((volatile int*)&fcount[cur]);
        if (F == 0) break;
        int *fr = front + cur * n, *nx = front + (cur ^ 1) * n, *ncount = fcount + (cur ^ 1);
        // claim a contiguous slice of the frontier; number its edges (grid-wide exclusive scan)
        const long long per = (F + nthreads - 1) / nthreads, lo = min(tid * per, (long long)F);
        const long long hi = min(lo + per, (long long)F);
        long long mine = 0, btotal;
        for (long long i = lo; i < hi; ++i) {
            long long d;
            val[i] = gj_claim(fr[i], s, alpha, r, pi0, mark, indptr, thr, rmax, touched, ntouched, nx, ncount,
                              &d, dangling);
            off[i] = d;
            mine += d;
        }
        long long excl = gj_block_scan(mine, &btotal);
        if (threadIdx.x == 0) bsum[blockIdx.x] = btotal;
        grid.sync();
        if (tid == 0) {
            fcount[cur] = 0;  // read by every thread before the barrier; the next frontier but one
            const double x = *dangling;  // after s's own claim, whatever the threads' order
            *dangling = 0.0;
            if (x > 0.0) gj_push_one(s, x, r, thr, rmax, mark, touched, ntouched, nx, ncount);
        }
        long long before = 0, total = 0;
        for (int b = threadIdx.x; b < gridDim.x; b += GJ_T) {
            total += bsum[b];
            if (b < blockIdx.x) before += bsum[b];
        }
        long long block_base, edges;
        gj_block_scan(before, &block_base);  // block sums: the edges of earlier blocks, and of all
        gj_block_scan(total, &edges);
        for (long long i = lo, at = block_base + excl; i < hi; ++i) {
            long long d = off[i];
            off[i] = at;
            shift[i] = indptr[fr[i]] - at;  // edge e of entry i is indices[shift[i] + e]
            at += d;
        }
        grid.sync();
        // push the frontier's edges, a chunk of consecutive ones per warp (lane l takes base + l + 32 j;
        // up to CHUNK, fewer when the frontier has too few edges to keep every warp busy): the owner of
        // e, the last i with off[i] <= e, by one binary search per chunk, then by steps ahead
        const long long warps = nthreads >> 5;
        const long long chunk = max(32LL, min((long long)CHUNK, ((edges + warps - 1) / warps + 31) & ~31LL));
        for (long long base = (tid >> 5) * chunk; base < edges; base += warps * chunk) {
            long long e = base + (threadIdx.x & 31);
            int a = 0, b = F;
            while (b - a > 1) { int mid = (a + b) >> 1; if (off[mid] <= e) a = mid; else b = mid; }
            for (long long stop = min(base + chunk, edges); e < stop; e += 32) {
                while (a + 1 < F && off[a + 1] <= e) ++a;
                gj_push_one(indices[shift[a] + e], val[a], r, thr, rmax, mark, touched, ntouched, nx, ncount);
            }
        }
        pushes += F;
        frontiers += 1;
        edge_count += edges;
        grid.sync();
    }
    if (tid == 0) { stats[0] += pushes; stats[1] += frontiers; stats[2] += edge_count; }
}
"""
CHUNK = 256  # consecutive frontier edges per warp and step of the persistent push
PERSISTENT_KERNEL = f"#define CHUNK {CHUNK}\n" + PUSH_DEVICE + PERSISTENT_CUDA


def persistent_kernel():
    return get_kernel(PERSISTENT_KERNEL, "gj_afp_push_persistent", cooperative=True)


def persistent_blocks(streams: int = 1) -> int:
    """Blocks of the persistent push: as many as stay resident at once, shared by ``streams`` queries
    in flight (a cooperative grid must be resident as a whole)."""
    cp = import_cupy()
    kernel = persistent_kernel()
    sms = int(cp.cuda.Device().attributes["MultiProcessorCount"])
    try:
        per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, THREADS, 0)
    except AttributeError:  # no occupancy call in this CuPy: __launch_bounds__ guarantees 4
        per_sm = 4
    return max(1, per_sm * sms // max(1, streams))


def push_persistent(q, rmax: float, adaptive: bool) -> None:
    """The round's push, every frontier in one cooperative launch (``q`` is the GPUQuery)."""
    g = q.index.graph
    args = (
        g.indptr, g.indices, q.thr[adaptive], rmax, np.int32(q.s), np.float64(q.index.params.alpha), q.r,
        q.pi0, q.mark, q.touched, q.counts[3:], q.front, np.int64(g.n), q.counts, q.bigval, q.off, q.shift,
        q.bsum, q.dangling, q.stats,
    )  # fmt: skip
    persistent_kernel()((q.blocks,), (THREADS,), args)
