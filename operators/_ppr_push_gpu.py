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
from ._ppr_push_steps import PPR_STEP_DEVICE

HYBRID = 2

PPR_PUSH_KERNEL = (
    PPR_STEP_DEVICE
    + r"""
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
)


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
    r, msg, msg2 = (cp.empty(n, dtype=T) for _ in range(3))  # zeroed by each run
    r_in = cp.zeros(n, dtype=T)  # zero between iterations: the merge clears what the push added
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
