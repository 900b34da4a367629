"""GPU (CuPy RawKernel) solver of single-source PPR by forward push, forward pull, or the hybrid.

Same iteration as the CPU solver (see ``_ppr_push_cpu``). One cooperative launch runs the whole
solve on a resident grid of ``blocks`` blocks of ``warps`` warps; slot q (frontier position or vertex
id) goes to warp q % warps of block (q / warps) % blocks, as the cost model assumes. A warp handles a
vertex of fewer than ``lanes * warps`` edges; larger ones are handled by the whole block. Statistics
for the next decision (the hybrid only) are counted as vertices join the next frontier or receive
mass; the last block to finish an iteration reduces them and picks the next model, so the host reads
the counters and the per-iteration trace once, at the end.
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy, resident_blocks

from ._ppr_cost import PULL, PUSH, cost_model, pull_static

HYBRID = 2

PPR_PUSH_KERNEL = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define W 32
#define B 8
#define WB (W * B)
#define RED_B 9u  // 1 + log2(W * B): a block reduction
#define RED_W 6u  // 1 + log2(W): a warp reduction
#define PUSH 0
#define PULL 1
#define HYBRID 2
typedef unsigned int u32;
// Statistics: rdw[blk] and rdw[blocks + warp], sqw likewise; counters: f_cur, f_next, touched count.
__device__ __forceinline__ void gj_add_slot(u32* st, int nb, long long q, u32 cb, u32 cw) {
    if (st == nullptr) return;  // push or pull alone: no decision to make, no statistics
    long long blk = (q / B) % nb;
    atomicAdd(&st[blk], cb);
    atomicAdd(&st[nb + blk * B + q % B], cw);
}
// one warp-aggregated append: lanes with `want` get consecutive slots of list (count in *n)
__device__ __forceinline__ long long gj_append(bool want, int* n) {
    unsigned mask = __ballot_sync(0xffffffffu, want);
    int lane = threadIdx.x & 31, base = 0;
    if (lane == __ffs(mask) - 1 && mask) base = atomicAdd(n, __popc(mask));
    base = __shfl_sync(0xffffffffu, base, __ffs(mask ? mask : 1u) - 1);
    return want ? base + __popc(mask & ((1u << lane) - 1)) : -1;
}
// joining the next frontier: the push-side statistics, the message or the dangling mass
template <typename T>
__device__ __forceinline__ void gj_activate(int u, T ru, long long q, const int* deg, int* front2, T* msg,
        double* dm_next, u32* rdw, int nb, double alpha) {
    int d = deg[u];
    front2[q] = u;
    gj_add_slot(rdw, nb, q, (u32)((d + WB - 1) / WB), (u32)((d + W - 1) / W));
    if (d > 0) msg[u] = (T)(alpha * (double)ru / d); else atomicAdd(dm_next, (double)ru);
}
template <typename T>
__device__ __forceinline__ void gj_send(int u, T m, T* r_in, int* touched, int* cnt, bool want) {
    bool first = false;
    if (want) first = atomicAdd(&r_in[u], m) == (T)0;
    long long q = gj_append(first, &cnt[2]);
    if (first) touched[q] = u;
}
// claim v: keep (1 - alpha) r(v), return its message alpha r(v) / d_out(v) (0 when dangling)
template <typename T>
__device__ __forceinline__ T gj_claim(int v, T* r, T* p, T* msg, double alpha) {
    T rv = r[v];
    p[v] += (T)((1.0 - alpha) * (double)rv);
    r[v] = (T)0;
    T m = msg[v];
    msg[v] = (T)0;
    return m;
}
template <typename T>
__device__ void gj_push(const long long* indptr, const int* indices, const int* front, int* cnt, T* r,
        T* r_in, T* p, T* msg, int* touched, const double* dm, int s, double alpha) {
    __shared__ int s_v[B];
    __shared__ T s_m[B];
    const int warp = threadIdx.x / W, lane = threadIdx.x % W, f = cnt[0];
    if (blockIdx.x == 0 && warp == 0) gj_send<T>(s, (T)(alpha * dm[0]), r_in, touched, cnt,
                                                lane == 0 && dm[0] > 0.0);
    for (long long base = (long long)blockIdx.x * B; base < f; base += (long long)gridDim.x * B) {
        long long q = base + warp;
        int v = q < f ? front[q] : -1;
        long long lo = v >= 0 ? indptr[v] : 0, hi = v >= 0 ? indptr[v + 1] : 0;
        T m = (T)0;
        if (v >= 0 && lane == 0) m = gj_claim<T>(v, r, p, msg, alpha);
        m = __shfl_sync(0xffffffffu, m, 0);
        bool big = hi - lo >= WB;
        if (lane == 0) { s_v[warp] = big ? v : -1; s_m[warp] = m; }
        if (!big)
            for (long long e0 = lo; e0 < hi; e0 += W)
                gj_send<T>(indices[e0 + lane < hi ? e0 + lane : lo], m, r_in, touched, cnt, e0 + lane < hi);
        __syncthreads();
        for (int j = 0; j < B; ++j) {
            int u = s_v[j];
            if (u < 0) continue;
            long long a = indptr[u], z = indptr[u + 1];
            for (long long e0 = a; e0 < z; e0 += WB) {
                long long e = e0 + threadIdx.x;
                gj_send<T>(indices[e < z ? e : a], s_m[j], r_in, touched, cnt, e < z);
            }
        }
        __syncthreads();
    }
}
// received mass: sqw statistics, residues merged, the next frontier
template <typename T>
__device__ void gj_merge(const int* deg, int* cnt, T* r, T* r_in, T* msg, const int* touched, int* front2,
        double* dm_next, u32* rdw, u32* sqw, int nb, double alpha, double tol) {
    const int t = cnt[2];
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i0 = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31); i0 < t; i0 += stride) {
        long long i = i0 + (threadIdx.x & 31);
        bool on = false;
        int u = 0;
        T ru = (T)0;
        if (i < t) {
            u = touched[i];
            gj_add_slot(sqw, nb, u, RED_B, RED_W);
            ru = r[u] + r_in[u];
            r_in[u] = (T)0;
            r[u] = ru;
            int d = deg[u];
            on = (double)ru > tol * (d > 1 ? d : 1);
        }
        long long q = gj_append(on, &cnt[1]);
        if (on) gj_activate<T>(u, ru, q, deg, front2, msg, dm_next, rdw, nb, alpha);
    }
}
// every vertex sums its in-neighbours' messages: no atomics on residues
template <typename T>
__device__ void gj_pull(const long long* tptr, const int* tind, const int* deg, int n, int* cnt, T* r,
        T* p, const T* msg, T* msg2, int* front2, const double* dm, double* dm_next, u32* rdw, u32* sqw,
        int nb, int s, int force, double alpha, double tol) {
    __shared__ double s_acc[B];
    const int warp = threadIdx.x / W, lane = threadIdx.x % W;
    for (long long base = (long long)blockIdx.x * B; base < n; base += (long long)gridDim.x * B) {
        long long u = base + warp;
        long long lo = u < n ? tptr[u] : 0, hi = u < n ? tptr[u + 1] : 0;
        bool big = hi - lo >= WB;
        double acc = 0.0;
        if (!big) {
            for (long long e = lo + lane; e < hi; e += W) acc += (double)msg[tind[e]];
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        }
        if (lane == 0) s_acc[warp] = big ? 0.0 : acc;
        __syncthreads();
        for (int j = 0; j < B; ++j) {  // in-degree >= WB: the whole block sums
            long long v = base + j;
            if (v >= n || tptr[v + 1] - tptr[v] < WB) continue;
            double part = 0.0;
            for (long long e = tptr[v] + threadIdx.x; e < tptr[v + 1]; e += WB) part += (double)msg[tind[e]];
            for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
            if (lane == 0) atomicAdd(&s_acc[j], part);
        }
        __syncthreads();
        bool on = false;
        T nr = (T)0;
        if (u < n && lane == 0) {
            acc = s_acc[warp] + (u == s ? alpha * dm[0] : 0.0);
            int d = deg[u];
            double thr = tol * (d > 1 ? d : 1);
            T ru = r[u];
            if ((double)ru > thr || u == force) { p[u] += (T)((1.0 - alpha) * (double)ru); ru = (T)0; }
            nr = (T)((double)ru + acc);
            r[u] = nr;
            msg2[u] = (T)0;
            if (acc > 0.0) gj_add_slot(sqw, nb, u, RED_B, RED_W);
            on = (double)nr > thr;
        }
        long long q = gj_append(on, &cnt[1]);
        if (on) gj_activate<T>((int)u, nr, q, deg, front2, msg2, dm_next, rdw, nb, alpha);
        __syncthreads();
    }
}
// The last block to finish an iteration: Phi_rdw and Phi_sqw of the next one, its model (the hybrid:
// push when Psi < 0), the trace row (model, Phi_rdw, Phi_sqw, frontier size), counters reset for it.
__device__ void gj_ppr_next(u32* rdw, u32* sqw, const u32* sblk, const u32* swrp, int nb, int* cnt,
        double* dm, double* trace, int ntrace, int mode, double rdr, double l1, double l2, double l3) {
    __shared__ double s_r[WB], s_q[WB];
    double br = 0.0, bq = 0.0;
    for (int i = threadIdx.x; rdw != nullptr && i < nb; i += WB) {  // written by other SMs: read from L2
        u32 wr = 0, wq = 0;
#pragma unroll
        for (int j = 0; j < B; ++j) {  // loads only: no store in between keeps them in flight together
            wr = max(wr, __ldcg(&rdw[nb + i * B + j]));
            wq = max(wq, swrp[i * B + j] + __ldcg(&sqw[nb + i * B + j]));
        }
        br = fmax(br, (double)(__ldcg(&rdw[i]) + wr));
        bq = fmax(bq, (double)(sblk[i] + __ldcg(&sqw[i]) + wq));
    }
    __syncthreads();
    for (int i = threadIdx.x; rdw != nullptr && i < nb * (1 + B); i += WB) {  // reset for the next iteration
        rdw[i] = 0;
        sqw[i] = 0;
    }
    s_r[threadIdx.x] = br;
    s_q[threadIdx.x] = bq;
    __syncthreads();
    for (int o = WB / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            s_r[threadIdx.x] = fmax(s_r[threadIdx.x], s_r[threadIdx.x + o]);
            s_q[threadIdx.x] = fmax(s_q[threadIdx.x], s_q[threadIdx.x + o]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        volatile int* c = cnt;
        int it = c[4] + 1, model = mode;
        if (mode == HYBRID) model = l1 * s_r[0] - l2 * rdr - l3 * s_q[0] < 0.0 ? PUSH : PULL;
        if (it < ntrace) {
            trace[4 * it] = model; trace[4 * it + 1] = s_r[0]; trace[4 * it + 2] = s_q[0];
            trace[4 * it + 3] = c[1];
        }
        c[0] = c[1]; c[1] = 0; c[2] = 0; c[3] = model; c[4] = it; c[5] = 0;
        volatile double* d = dm;
        d[0] = d[1]; d[1] = 0.0;
    }
}
// True in the last block of the grid to get here (its writes and everyone's before them visible).
__device__ __forceinline__ bool gj_last_block(int* ticket) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(ticket, 1) == gridDim.x - 1;
        if (last) __threadfence();
    }
    __syncthreads();
    return last;
}
// The whole solve in one cooperative launch: per iteration the chosen model, then the last block to
// finish decides the next; grid-wide barriers between the steps. cnt: frontier, next frontier,
// touched, model, iteration, blocks finished.
// 8 resident blocks per SM cap registers at 32: ptxas spills about 40 bytes of loop state (L1-resident).
template <typename T>
__device__ void gj_ppr_solve(const long long* indptr, const int* indices, const long long* tptr,
        const int* tind, const int* deg, int n, int* cnt, T* r, T* r_in, T* p, T* msg, T* msg2, int* front,
        int* front2, int* touched, double* dm, u32* rdw, u32* sqw, const u32* sblk, const u32* swrp,
        int nb, int s, double alpha, double tol, int limit, int mode, double rdr, double l1, double l2,
        double l3, double* trace, int ntrace) {
    cg::grid_group grid = cg::this_grid();
    for (int pulls = 0;;) {  // the frontier arrays swap every iteration, the message arrays after a pull
        const int f = *((volatile int*)&cnt[0]), it = *((volatile int*)&cnt[4]);
        if (f == 0 || it >= limit) break;
        int* fa = it & 1 ? front2 : front;
        int* fb = it & 1 ? front : front2;
        T* ma = pulls & 1 ? msg2 : msg;
        if (*((volatile int*)&cnt[3]) == PUSH) {
            gj_push<T>(indptr, indices, fa, cnt, r, r_in, p, ma, touched, dm, s, alpha);
            grid.sync();
            gj_merge<T>(deg, cnt, r, r_in, ma, touched, fb, dm + 1, rdw, sqw, nb, alpha, tol);
        } else {
            gj_pull<T>(tptr, tind, deg, n, cnt, r, p, ma, pulls & 1 ? msg : msg2, fb, dm, dm + 1, rdw, sqw,
                       nb, s, it == 0 ? s : -1, alpha, tol);
            ++pulls;
        }
        if (gj_last_block(&cnt[5]))
            gj_ppr_next(rdw, sqw, sblk, swrp, nb, cnt, dm, trace, ntrace, mode, rdr, l1, l2, l3);
        grid.sync();
    }
}
#define GJ_PPR_ENTRY(T, S)                                                                                \
extern "C" __global__ void __launch_bounds__(WB, 2048 / WB) gj_ppr_solve_##S(const long long* indptr,    \
        const int* indices, const long long* tptr, const int* tind, const int* deg, int n, int* cnt, T* r, \
        T* r_in, T* p, T* msg, T* msg2, int* front, int* front2, int* touched, double* dm, u32* rdw,      \
        u32* sqw, const u32* sblk, const u32* swrp, int nb, int s, double alpha, double tol, int limit,   \
        int mode, double rdr, double l1, double l2, double l3, double* trace, int ntrace) {               \
    gj_ppr_solve<T>(indptr, indices, tptr, tind, deg, n, cnt, r, r_in, p, msg, msg2, front, front2,       \
                    touched, dm, rdw, sqw, sblk, swrp, nb, s, alpha, tol, limit, mode, rdr, l1, l2, l3,   \
                    trace, ntrace);                                                                       \
}
GJ_PPR_ENTRY(double, f64)
GJ_PPR_ENTRY(float, f32)
"""


TRACE = 4096  # iterations whose model and statistics are kept (as on the CPU)


def solver(G, mode: int, alpha: float, tol: float, dtype, cost):
    """A function ``run(s, limit) -> (reserves, iterations or None, models, residual mass)``."""
    cp = import_cupy()
    if G.indices.dtype != np.int32:
        raise ValueError("the GPU push/pull PPR solver needs int32 vertex ids (n < 2**31)")
    cost = cost or cost_model("gpu")
    if (cost.lanes, cost.warps) != (32, 8):
        raise ValueError("the GPU kernels run blocks of 8 warps of 32 lanes; the cost model must say so")
    plan = G.derived(f"ppr_push_plan_{cost}", lambda g: _plan(g, cost))
    tptr, tind, deg, sblk, swrp, rdr = plan
    T = np.float64 if dtype == np.float64 else np.float32
    name = f"gj_ppr_solve_{'f64' if T is np.float64 else 'f32'}"
    kernel = get_kernel(PPR_PUSH_KERNEL, name, cooperative=True)
    n, nb = G.n, cost.blocks
    resident = resident_blocks(kernel, cost.lanes * cost.warps)
    if resident is not None and resident < nb:
        raise RuntimeError(f"the PPR solver's cooperative grid of {nb} blocks does not fit at once on this "
                           f"GPU (at most {resident}): give the cost model fewer blocks")  # fmt: skip
    r, r_in, msg, msg2 = (cp.zeros(n, dtype=T) for _ in range(4))
    front, front2, touched = (cp.empty(n, dtype=np.int32) for _ in range(3))
    rdw, sqw = cp.zeros(nb * (1 + cost.warps), np.uint32), cp.zeros(nb * (1 + cost.warps), np.uint32)
    if mode != HYBRID:  # no decision to make: null statistics arrays, the kernel skips their atomics
        rdw = sqw = np.uint64(0)
    cnt, dm, trace = cp.zeros(6, np.int32), cp.zeros(2, np.float64), cp.zeros((TRACE, 4), np.float64)
    wb = cost.lanes * cost.warps
    model = (np.int32(mode), np.float64(rdr), np.float64(cost.l1), np.float64(cost.l2), np.float64(cost.l3))

    def run(s: int, limit: int):
        p = cp.zeros(n, dtype=T)
        for a in (r, msg, msg2):
            a.fill(0)
        d = int(deg[s])
        r[s] = 1
        front[0] = s
        if d:
            msg[s] = alpha / d
        rdw0 = -(-d // wb) + -(-d // cost.lanes)  # the first decision: the source alone, nothing received
        first = mode if mode in (PUSH, PULL) else cost.choose(rdw0, rdr, rdr)
        cnt.set(np.array([1, 0, 0, first, 0, 0], np.int32))
        dm.set(np.array([0.0 if d else 1.0, 0.0]))
        trace[0] = cp.asarray([first, rdw0, rdr, 1.0])
        args = (G.indptr, G.indices, tptr, tind, deg, np.int32(n), cnt, r, r_in, p, msg, msg2, front, front2,
                touched, dm, rdw, sqw, sblk, swrp, np.int32(nb), np.int32(s), np.float64(alpha),
                np.float64(tol), np.int32(min(limit, 2**31 - 1)), *model, trace, np.int32(TRACE))  # fmt: skip
        kernel((nb,), (wb,), args)
        f, _, _, _, it, _ = (int(v) for v in cnt.get())
        run.last_trace = trace[: min(it, TRACE)].get()  # (model, Phi_rdw, Phi_sqw, frontier) per iteration
        models = "".join("PL"[int(m) == PULL] for m in run.last_trace[:, 0])
        return p, (None if f else it), models, float(r.sum())

    return run


def _plan(G, cost):
    """Transposed CSR, out-degrees and the pull sweep's fixed statistics, on the GPU."""
    cp = import_cupy()
    t = G.transpose()
    deg = cp.diff(G.indptr).astype(np.int32)
    blk, wrp, rdr = pull_static(cp.diff(t.indptr).get(), cost)
    return t.indptr, t.indices, deg, cp.asarray(blk, np.uint32), cp.asarray(wrp, np.uint32), rdr
