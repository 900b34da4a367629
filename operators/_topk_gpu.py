"""GPU (CuPy RawKernel) primitives of the top-k PPR query (Sec. 4 of the kPAR paper).

Forward push runs frontier by frontier: a thread claims a frontier vertex's residue (atomicExch)
and its out-edges are pushed with atomicAdd by tiles of TSIZE threads, balanced inside each block
by a prefix sum over ceil(d_out / TSIZE) (Alg. 5); vertices of more than BIG_DEGREE out-edges get a
block each. A vertex joins the next frontier once, guarded by bit 1 of ``mark`` (bit 2 = touched:
listed in ``touched``, so every reset and scan costs O(touched), not O(n)).
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy

from ._topk_gpu_estimate import bound_reduction_gpu, compute_ppr_gpu, fallback_gpu

TSIZE = 8
BIG_DEGREE = 8192
THREADS = 256

PUSH_CUDA = r"""
#define GJ_T 256
__device__ __forceinline__ void gj_push_one(int w, double inc, double* r, const double* thr, double rmax,
        int* mark, int* touched, int* ntouched, int* next, int* ncount) {
    double now = atomicAdd(&r[w], inc) + inc;
    int m = *((volatile int*)&mark[w]);
    if (!(m & 1) && now > thr[w] * rmax) {
        int old = atomicOr(&mark[w], 3);
        if (!(old & 1)) next[atomicAdd(ncount, 1)] = w;
        if (!(old & 2)) touched[atomicAdd(ntouched, 1)] = w;
    } else if (!(m & 2)) {
        if (!(atomicOr(&mark[w], 2) & 2)) touched[atomicAdd(ntouched, 1)] = w;
    }
}
// claim frontier vertex u: its reserve grows, returns alpha * r(u) / d_out (or pushes to s when dangling)
__device__ __forceinline__ double gj_claim(int u, int s, double alpha, double* r, double* pi0, int* mark,
        const long long* indptr, const double* thr, double rmax, int* touched, int* ntouched,
        int* next, int* ncount, long long* deg) {
    atomicAnd(&mark[u], ~1);
    double ru = __longlong_as_double((long long)atomicExch((unsigned long long*)&r[u], 0ULL));
    pi0[u] += (1.0 - alpha) * ru;
    *deg = indptr[u + 1] - indptr[u];
    if (*deg == 0) {
        gj_push_one(s, alpha * ru, r, thr, rmax, mark, touched, ntouched, next, ncount);
        return 0.0;
    }
    return alpha * ru / (double)*deg;
}
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
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < *ntouched; i += gridDim.x * blockDim.x) {
        int u = touched[i];
        if (r[u] > thr[u] * rmax && !(atomicOr(&mark[u], 1) & 1)) next[atomicAdd(ncount, 1)] = u;
    }
}

extern "C" __global__ void gj_query_clear(const int* touched, const int* ntouched, double* r, double* pi0,
        int* mark) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < *ntouched; i += gridDim.x * blockDim.x) {
        int u = touched[i];
        r[u] = 0.0; pi0[u] = 0.0; mark[u] = 0;
    }
}

extern "C" __global__ void gj_query_start(int s, double* r, int* mark, int* touched, int* counts) {
    r[s] = 1.0; mark[s] = 2; touched[0] = s;
    counts[0] = counts[1] = counts[2] = counts[4] = counts[5] = counts[6] = 0;
    counts[3] = 1;
}

extern "C" __global__ void gj_counts_clear(int* counts) {
    counts[0] = counts[1] = counts[2] = counts[4] = counts[5] = counts[6] = 0;
}

extern "C" __global__ void gj_select_candidates(const int* touched, const int* ntouched, const double* pi0,
        double tau, const int* h_index, int exclude_h, int* cand, int* ncand) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < *ntouched; i += gridDim.x * blockDim.x) {
        int t = touched[i];
        if (pi0[t] >= tau && !(exclude_h && h_index[t] >= 0)) cand[atomicAdd(ncand, 1)] = t;
    }
}
"""
PUSH_KERNELS = f"#define TSIZE {TSIZE}\n#define BIG_DEGREE {BIG_DEGREE}\n" + PUSH_CUDA


def _kernel(name):
    return get_kernel(PUSH_KERNELS, name)


class GPUQuery:
    """The workspace and primitives of Algorithm 3 on the GPU (one per thread and index).

    ``counts``: [0:3] frontier sizes (a ring: push i reads slot i%3, appends to (i+1)%3 and clears
    (i+2)%3), [3] touched, [4:6] big-vertex lists (ring of 2), [6] candidates.
    """

    SELECT_MIN = 1 << 16  # from this many touched vertices, candidates by flag + select
    LAUNCHES = 8  # push iterations launched between two reads of the frontier size

    def __init__(self, index):
        cp = import_cupy()
        g = index.graph
        if g.indices.dtype != np.int32:
            raise NotImplementedError("GPU top-k PPR queries support graphs with fewer than 2**31 vertices")
        n = g.n
        self.index = index
        deg = cp.diff(g.indptr)
        deg1 = cp.maximum(deg, 1).astype(cp.float64)
        self.thr = {True: deg1 * index.arrays["beta"], False: deg1}
        self.has_big = bool(n) and int(deg.max()) > BIG_DEGREE
        self.inv_omega = 1.0 / index.arrays["omega"].astype(cp.float64)
        self.r = cp.zeros(n, dtype=cp.float64)
        self.pi0 = cp.zeros(n, dtype=cp.float64)
        self.mark = cp.zeros(n, dtype=cp.int32)
        self.touched = cp.empty(n, dtype=cp.int32)
        self.front = cp.empty((2, n), dtype=cp.int32)
        self.big = cp.empty(n, dtype=cp.int32)
        self.bigval = cp.empty(n, dtype=cp.float64)
        self.cand = cp.empty(n, dtype=cp.int32)
        self.counts = cp.zeros(8, dtype=cp.int32)
        self.pushes = cp.zeros(1, dtype=cp.uint64)
        self.sm_blocks = int(cp.cuda.Device().attributes["MultiProcessorCount"])
        self.nt = 0

    def ntouched(self) -> int:
        return int(self.counts[3])

    def start(self, s: int) -> None:
        self.s = s
        _kernel("gj_query_clear")(
            (self.sm_blocks * 4,), (THREADS,), (self.touched, self.counts[3:], self.r, self.pi0, self.mark)
        )
        _kernel("gj_query_start")((1,), (1,), (np.int32(s), self.r, self.mark, self.touched, self.counts))

    def push(self, rmax: float, adaptive: bool, tiling: bool) -> int:
        """Regenerate the frontier, then push until it is empty; returns the number of pushes."""
        thr, c, rmax = self.thr[adaptive], self.counts, np.float64(rmax)
        _kernel("gj_counts_clear")((1,), (1,), (c,))
        args = (self.touched, c[3:], self.r, thr, rmax, self.mark, self.front[0], c)
        _kernel("gj_afp_frontier")((self.sm_blocks * 4,), (THREADS,), args)
        push = _kernel("gj_afp_push_tiles" if tiling else "gj_afp_push_threads")
        self.pushes.fill(0)
        grid = (self.sm_blocks * 4,)
        i = 0
        while int(c[i % 3]):  # a host sync per LAUNCHES iterations; empty frontiers cost a launch
            for _ in range(self.LAUNCHES):
                args = (
                self.index.graph.indptr, self.index.graph.indices, thr, rmax, np.int32(self.s),
                np.float64(self.index.params.alpha), self.r, self.pi0, self.mark, self.touched, c[3:],
                self.front[i % 2], c[i % 3 :], self.front[(i + 1) % 2], c[(i + 1) % 3 :], c[(i + 2) % 3 :],
                self.big, self.bigval, c[4 + i % 2 :], c[4 + (i + 1) % 2 :], self.pushes,
                )  # fmt: skip
                push(grid, (THREADS,), args)
                if tiling and self.has_big:
                    _kernel("gj_afp_push_big")((self.sm_blocks * 2,), (THREADS,), args)
                i += 1
        self.nt = int(c[3])
        return int(self.pushes[0])

    def candidates(self, tau: float, exclude_h: bool):
        cp = import_cupy()
        h_index = self.index.arrays["h_index"]
        if self.nt >= self.SELECT_MIN:  # many: flag + select
            t = self.touched[: self.nt]
            keep = self.pi0[t] >= tau
            if exclude_h:
                keep &= h_index[t] < 0
            cand = t[keep]
        else:  # few: atomic append
            _kernel("gj_select_candidates")(
                (self.sm_blocks,), (THREADS,),
                (self.touched, self.counts[3:], self.pi0, np.float64(tau), h_index, np.int32(exclude_h),
                 self.cand, self.counts[6:]),
            )  # fmt: skip
            cand = self.cand[: int(self.counts[6])]
        return cand[cp.argsort(-self.pi0[cand])]

    def bound_reduction(self):
        est = bound_reduction_gpu(self)
        self.returned_mass = est[-1]
        return est[:-1]

    def compute_ppr(self, cand, est_h, tiling: bool):
        return compute_ppr_gpu(self, cand, est_h, TSIZE if tiling else 1)

    def returned(self) -> float:
        return float(self.returned_mass)

    def pi0_of(self, vertices):
        return self.pi0[vertices]

    def top(self, vertices, est, k: int):
        best = import_cupy().argsort(-est)[:k]
        return vertices[best], est[best]

    def fallback(self, walks_per_mass: float, key: int):
        return fallback_gpu(self, walks_per_mass, key)
