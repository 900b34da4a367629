"""The paper's GPU schedule of the top-k PPR push (Sec. 4), a launch per frontier: tiles of TSIZE
threads balanced inside each block by a prefix sum over ceil(d_out / TSIZE) (Alg. 5), a block per
vertex of more than BIG_DEGREE out-edges, or a thread per vertex (``tiling=False``); the host reads
the frontier size every LAUNCHES launches. Kept for the ablation (``topk_ppr(persistent=False)``).
"""

from __future__ import annotations

import numpy as np

from operators._gpu.registry import Kernel
from operators.topk.gpu.push import PUSH_DEFINES, PUSH_DEVICE, THREADS, PushState

TSIZE = 8
BIG_DEGREE = 8192
LAUNCHES = 8  # frontier launches between two host reads of the frontier size

FRONTIER_CUDA = r"""
#define GJ_PUSH_ARGS const long long* indptr, const int* indices, double rmax, int s, \
    double alpha, gj_vertex* vs, double* pi0, unsigned char* seen, const int* front, \
    const int* fcount, int* next, int* ncount, int* zero_count, int* big, double* bigval, int* nbig, \
    int* zero_big, unsigned long long* pushes
#define GJ_PUSH_REST vs, rmax, seen, next, ncount

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
            double val = gj_claim(u, s, alpha, vs, pi0, indptr, rmax, seen, next, ncount, &d);
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
        double val = gj_claim(u, s, alpha, vs, pi0, indptr, rmax, seen, next, ncount, &d);
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

extern "C" __global__ void gj_afp_frontier(const int* touched, const int* ntouched, gj_vertex* vs,
        double rmax, int* next, int* ncount) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < *ntouched; i += gridDim.x * blockDim.x)
        gj_regenerate(i, touched, vs, rmax, next, ncount);
}
"""
FRONTIER_KERNELS = PUSH_DEVICE + FRONTIER_CUDA

FRONTIER = Kernel(
    FRONTIER_KERNELS,
    ("gj_afp_push_tiles", "gj_afp_push_threads", "gj_afp_push_big", "gj_afp_frontier"),
    defines={**PUSH_DEFINES, "TSIZE": TSIZE, "BIG_DEGREE": BIG_DEGREE},
    label="topk-push",
)


def push_frontiers(push: PushState, s: int, rmax: float, adaptive: bool, tiling: bool) -> int:
    """The round's push from source ``s``, a launch per frontier; returns the number of launches."""
    g, c = push.index.graph, push.counts
    push.load_thresholds(adaptive)

    def kernel(name):
        return FRONTIER.get(name)

    grid = (push.sm_blocks * 4,)
    c[:3] = 0
    c[4:6] = 0
    args = (push.touched, c[3:], push.state, rmax, push.front[0], c)
    kernel("gj_afp_frontier")(grid, (THREADS,), args)
    push_kernel = kernel("gj_afp_push_tiles" if tiling else "gj_afp_push_threads")
    has_big = push.max_degree > BIG_DEGREE
    i = 0
    while int(c[i % 3]):  # a host sync per LAUNCHES iterations; empty frontiers cost a launch
        for _ in range(LAUNCHES):
            args = (
                g.indptr,
                g.indices,
                rmax,
                np.int32(s),
                np.float64(push.index.params.alpha),
                push.state,
                push.pi0,
                push.seen,
                push.front[i % 2],
                c[i % 3 :],
                push.front[(i + 1) % 2],
                c[(i + 1) % 3 :],
                c[(i + 2) % 3 :],
                push.big,
                push.bigval,
                c[4 + i % 2 :],
                c[4 + (i + 1) % 2 :],
                push.stats,
            )
            push_kernel(grid, (THREADS,), args)
            if tiling and has_big:
                kernel("gj_afp_push_big")((push.sm_blocks * 2,), (THREADS,), args)
            i += 1
    return i
