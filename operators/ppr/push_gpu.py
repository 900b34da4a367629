"""GPU (CuPy RawKernel) solver of single-source PPR by forward push, forward pull, or the hybrid.

Same iteration as the CPU solver (``_ppr_push_cpu``). One cooperative launch runs the whole solve on a
resident grid of ``blocks`` blocks of ``warps`` warps; slot q (frontier position or vertex id) goes to
warp q % warps of block (q / warps) % blocks, as the cost model assumes. A warp handles a vertex of
fewer than ``lanes * warps`` edges, the whole block a larger one. The hybrid's statistics are counted
as vertices join the next frontier or receive mass; the last block to finish an iteration reduces
them and picks the next model, so the host reads the counters and the trace once, at the end. After
a push, a bound from the frontier's size and its largest out-degrees often settles the choice alone
(``gj_ppr_next``), which keeps a sparse solve as fast as push alone.
"""

from __future__ import annotations

import threading

import numpy as np

from graphs._device import import_cupy
from operators._gpu.blocks import SCAN_CUDA
from operators._gpu.launch import resident_blocks
from operators._gpu.registry import Kernel
from operators.ppr.cost import HYBRID, PULL, PUSH, cost_model, frontier_rdw, light_degree
from operators.ppr.epochs import MAX_EPOCHS, first_threshold, floor_threshold, next_threshold, rounding
from operators.ppr.pull_steps import PPR_PULL_DEVICE
from operators.ppr.push_plan import MAX_ITEMS, build_plan, row_stride
from operators.ppr.push_steps import PPR_STEP_DEVICE, STEP_DEFINES, WANTED

TRACE = 4096  # iterations whose model and statistics are kept (as on the CPU)
HEAD_ROWS = 128  # trace rows copied with the counters after each run (more: a second copy)


PPR_PUSH_KERNEL = (
    PPR_STEP_DEVICE
    + PPR_PULL_DEVICE
    + r"""
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
// The whole solve of a batch in one cooperative launch: per iteration the chosen model, then the last
// block to finish decides the next; grid-wide barriers between the steps. cnt: frontier, next
// frontier, touched, state (the model, WANTED, COUNTING), iteration, blocks finished, heavy vertices in
// the next frontier. dm: dangling mass per source, current then next.
// 8 resident blocks per SM cap registers at 32: ptxas spills about 40 bytes of loop state (L1-resident).
template <typename T, bool MANY>
__device__ void gj_ppr_solve(const long long* indptr, const int* indices, const long long* tptr,
        const int* tind, const int* deg, int n, int* cnt, T* r, T* r_in, T* p, T* msg, T* msg2, int* front,
        int* front2, int* touched, double* dm, u32* rdw, u32* sqw, const u32* sblk, const u32* swrp,
        int nb, const Rows R, double alpha, double tol, int limit, int mode, double rdr, double l1,
        double l2, double l3, int light, int dmax, double* trace, int ntrace, const int* bptr,
        const int* bv) {
    cg::grid_group grid = cg::this_grid();
    const int ns = R.ns;
    for (int pulls = 0;;) {  // the frontier arrays swap every iteration, the message arrays after a pull
        const int4 lo = __ldcg(reinterpret_cast<const int4*>(cnt));  // written by the last block: from L2
        const int f = lo.x, state = lo.w, it = __ldcg(&cnt[4]), model = state & 1;
        const bool wanted = state & WANTED, counting = state & COUNTING;
        int* fb = it & 1 ? front : front2;
        if (wanted) {  // the bound left the choice after a push open: its statistics, then choose again
            gj_push_stats<MANY>(deg, cnt, touched, fb, rdw, sqw, nb, R);
        } else {
            if (f == 0 || it >= limit) break;
            int* fa = it & 1 ? front2 : front;
            T* ma = pulls & 1 ? msg2 : msg;
            if (model == PUSH) {
                gj_push<T, MANY>(indptr, indices, fa, cnt, r, r_in, p, ma, touched, dm, R, alpha);
                grid.sync();
                gj_merge<T, MANY>(deg, cnt, r, r_in, ma, touched, fb, dm + ns, counting ? rdw : nullptr,
                                  counting ? sqw : nullptr, nb, light, R, alpha, tol);
            } else {
                gj_pull<T, MANY>(tptr, tind, deg, n, cnt, r, p, ma, pulls & 1 ? msg : msg2, fb, dm, dm + ns,
                                 rdw, sqw, nb, R, it == 0, alpha, tol, bptr, bv);
                ++pulls;
            }
        }
        if (gj_last_block(&cnt[5]))
            gj_ppr_next(rdw, sqw, sblk, swrp, nb, ns, cnt, dm, trace, ntrace, mode, rdr, l1, l2, l3, light,
                        dmax, wanted || model == PUSH, wanted || model != PUSH || counting);
        grid.sync();
    }
}
#define GJ_PPR_ENTRY(T, MANY, S)                                                                          \
extern "C" __global__ void __launch_bounds__(WB, 2048 / WB) gj_ppr_solve_##S(const long long* indptr,    \
        const int* indices, const long long* tptr, const int* tind, const int* deg, int n, int* cnt, T* r, \
        T* r_in, T* p, T* msg, T* msg2, int* front, int* front2, int* touched, double* dm, u32* rdw,      \
        u32* sqw, const u32* sblk, const u32* swrp, int nb, const int* src, int ns, int stride, u64 magic,\
        double alpha, double tol, int limit, int mode, double rdr, double l1, double l2, double l3,       \
        int light, int dmax, double* trace, int ntrace, const int* bptr, const int* bv) {                 \
    const Rows R = {src, magic, ns, stride};                                                              \
    gj_ppr_solve<T, MANY>(indptr, indices, tptr, tind, deg, n, cnt, r, r_in, p, msg, msg2, front, front2, \
                          touched, dm, rdw, sqw, sblk, swrp, nb, R, alpha, tol, limit, mode, rdr, l1, l2, \
                          l3, light, dmax, trace, ntrace, bptr, bv);                                      \
}
GJ_PPR_ENTRY(double, false, f64)
GJ_PPR_ENTRY(float, false, f32)
GJ_PPR_ENTRY(double, true, batch_f64)
GJ_PPR_ENTRY(float, true, batch_f32)
"""
)

# An epoch's restart (``operators.ppr.epochs``): the reserves and residues stay; the active set becomes
# every item over the new threshold theta, in rows whose residue mass res is still above the target,
# written as the next frontier of iteration it - 1 (the host sets the counters: that frontier's
# statistics WANTED), with its messages in msg and its dangling mass as the next one (dm_next).
PPR_RESTART_KERNEL = (
    PPR_STEP_DEVICE
    + r"""
template <typename T, bool MANY>
__device__ void gj_ppr_restart(const int* deg, int n, int* cnt, const T* r, T* msg, T* msg2, int* front,
        double* dm_next, const T* res, const Rows R, double target, double theta, int light, double alpha) {
    const long long used = (long long)R.ns * R.stride, step = (long long)gridDim.x * blockDim.x;
    for (long long i0 = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31); i0 < used; i0 += step) {
        const long long i = i0 + (threadIdx.x & 31);
        bool on = false;
        int d = 0;
        T ri = (T)0;
        if (i < used) {
            const int v = gj_vertex<MANY>(R, (int)i);
            msg[i] = (T)0;
            msg2[i] = (T)0;
            if (v < n && (double)res[gj_row<MANY>(R, (int)i)] > target) {
                ri = r[i];
                d = deg[v];
                on = (double)ri > theta * (d > 1 ? d : 1);
            }
        }
        const long long q = gj_append(on, &cnt[1]);
        gj_count(on && d > light, &cnt[6]);
        if (on) {
            double* dm_row = dm_next + gj_row<MANY>(R, (int)i);
            gj_activate<T>((int)i, d, ri, q, front, msg, dm_row, nullptr, 0, alpha);
        }
    }
}
#define GJ_RESTART_ENTRY(T, MANY, S)                                                                      \
extern "C" __global__ void gj_ppr_restart_##S(const int* deg, int n, int* cnt, const T* r, T* msg,       \
        T* msg2, int* front, double* dm_next, const T* res, const int* src, int ns, int stride, u64 magic, \
        double target, double theta, int light, double alpha) {                                          \
    const Rows R = {src, magic, ns, stride};                                                              \
    gj_ppr_restart<T, MANY>(deg, n, cnt, r, msg, msg2, front, dm_next, res, R, target, theta, light, alpha); \
}
GJ_RESTART_ENTRY(double, false, f64)
GJ_RESTART_ENTRY(float, false, f32)
GJ_RESTART_ENTRY(double, true, batch_f64)
GJ_RESTART_ENTRY(float, true, batch_f32)
"""
)

# The first state of a batch, written whole (no memset before): row k holds source src[k] with residue 1
# and its message; every other residue, message and reserve is zero. Counters, trace row 0, dangling
# masses and the residue sums (res) start here too.
PPR_INIT_KERNEL = (
    SCAN_CUDA
    + r"""
template <typename T>
__device__ void gj_ppr_init(const int* deg, const int* src, int ns, int stride, T* r, T* msg, T* msg2, T* p,
        int* front, double* dm, int* cnt, double* trace, T* res, int first, double rdw0, double rdr,
        double alpha) {
    const int used = ns * stride, step = gridDim.x * blockDim.x;  // items are int32 (MAX_ITEMS)
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < used; i += step) {
        const int k = i / stride, s = src[k], d = i - k * stride == s ? deg[s] : -1;
        r[i] = d >= 0 ? (T)1 : (T)0;
        msg[i] = d > 0 ? (T)(alpha / d) : (T)0;
        msg2[i] = (T)0;
        p[i] = (T)0;
    }
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < ns; k += step) {
        const int d = deg[src[k]];
        front[k] = k * stride + src[k];
        dm[k] = d > 0 ? 0.0 : 1.0;  // a dangling source's mass returns to it
        dm[ns + k] = 0.0;
        res[k] = (T)0;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // counters: see gj_ppr_solve
        cnt[0] = ns; cnt[1] = 0; cnt[2] = 0; cnt[3] = first; cnt[4] = 0; cnt[5] = 0; cnt[6] = 0;
        trace[0] = first; trace[1] = rdw0; trace[2] = rdr; trace[3] = ns; trace[4] = 0;
    }
}
#define GJ_INIT_ENTRY(T, S)                                                                               \
extern "C" __global__ void gj_ppr_init_##S(const int* deg, const int* src, int ns, int stride, T* r,     \
        T* msg, T* msg2, T* p, int* front, double* dm, int* cnt, double* trace, T* res, int first,       \
        double rdw0, double rdr, double alpha) {                                                          \
    gj_ppr_init<T>(deg, src, ns, stride, r, msg, msg2, p, front, dm, cnt, trace, res, first, rdw0, rdr,  \
                   alpha);                                                                                \
}
GJ_INIT_ENTRY(double, f64)
GJ_INIT_ENTRY(float, f32)
// each row's remaining residue, after the solve: row blockIdx.y, block sums, one atomic per block
template <typename T>
__device__ void gj_row_sums(const T* r, int stride, T* res) {
    const T* row = r + (long long)blockIdx.y * stride;
    double s = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < stride; i += gridDim.x * blockDim.x)
        s += (double)row[i];
    s = gj_block_sum(s);
    if (threadIdx.x == 0 && s != 0.0) atomicAdd(&res[blockIdx.y], (T)s);
}
#define GJ_ROW_SUMS_ENTRY(T, S) \
extern "C" __global__ void gj_row_sums_##S(const T* r, int stride, T* res) { gj_row_sums<T>(r, stride, res); }
GJ_ROW_SUMS_ENTRY(double, f64)
GJ_ROW_SUMS_ENTRY(float, f32)
"""
)


# The fused solver runs 8 resident blocks of 256 threads per SM (its cost model's layout, and a
# cooperative grid must be resident), which caps it at 32 registers: it may spill loop state to L1,
# its choice of the next model (gj_ppr_next, mangled: called by one block once per iteration, off the hot
# loops, and not inlined so that the loops keep their registers) too. A batch of sources adds registers
# for its row arithmetic.
PPR_PUSH = Kernel(
    PPR_PUSH_KERNEL,
    ("gj_ppr_solve_f32", "gj_ppr_solve_f64", "gj_ppr_solve_batch_f32", "gj_ppr_solve_batch_f64"),
    defines=STEP_DEFINES,
    spill_budget={
        "gj_ppr_solve_f32": 64,
        "gj_ppr_solve_f64": 80,
        "gj_ppr_solve_batch_f32": 104,
        "gj_ppr_solve_batch_f64": 128,
        "_Z11gj_ppr_nextPjS_PKjS1_iiPiPdS3_iiddddiibb": 104,
    },
    local_budget={
        "gj_ppr_solve_f32": 56,
        "gj_ppr_solve_f64": 56,
        "gj_ppr_solve_batch_f32": 56,
        "gj_ppr_solve_batch_f64": 64,
    },
    cooperative=True,
    label="ppr-push-pull",
)
PPR_RESTART = Kernel(
    PPR_RESTART_KERNEL,
    ("gj_ppr_restart_f32", "gj_ppr_restart_f64", "gj_ppr_restart_batch_f32", "gj_ppr_restart_batch_f64"),
    defines=STEP_DEFINES,
    label="ppr-restart",
)
PPR_INIT = Kernel(
    PPR_INIT_KERNEL,
    ("gj_ppr_init_f32", "gj_ppr_init_f64", "gj_row_sums_f32", "gj_row_sums_f64"),
    label="ppr-init",
)


def solver(G, mode: int, alpha: float, tol: float, dtype, cost, batch: int = 1, r_max: float | None = None):
    """``run(sources, limit) -> (reserves (len(sources), n), iterations or None, models, residuals)``."""
    work = workspace(G, dtype, cost, batch)

    def run(sources, limit: int):
        out = work(sources, limit, mode, alpha, tol, r_max)
        run.last_kernel_ms, run.last_trace = work.last_kernel_ms, work.last_trace  # for tests, benchmarks
        return out

    return run


def workspace(G, dtype, cost, batch: int = 1):
    """``solver`` taking the model, alpha, tol and r_max per run: ``run(sources, limit, mode, alpha, tol,
    r_max)``, which returns ``None`` as iterations when ``limit`` or the epochs ran out; runs
    of any model and tolerance share its arrays (each run leaves them as the next starts, as the hybrid's
    iterations do between models)."""
    cp = import_cupy()
    if G.indices.dtype != np.int32:
        raise ValueError("the GPU push/pull PPR solver needs int32 vertex ids (n < 2**31)")
    cost = cost or cost_model("gpu")
    if (cost.lanes, cost.warps) != (32, 8) or cost.blocks % 4:
        raise ValueError(
            "the GPU kernels run blocks of 8 warps of 32 lanes, a multiple of 4 blocks (vector "
            "loads of the statistics); the cost model must say so"
        )
    plan = G.derived(f"ppr_push_plan_{cost}", lambda g: build_plan(g, cost))
    tptr, tind, deg, deg_host, sblk, swrp, rdr, static_max, dmax, bptr, bv = plan
    T = np.float64 if dtype == np.float64 else np.float32
    name = f"gj_ppr_solve_{'batch_' if batch > 1 else ''}{'f64' if T is np.float64 else 'f32'}"
    kernel = PPR_PUSH.get(name)
    init = PPR_INIT.get(f"gj_ppr_init_{name[-3:]}")
    restart = PPR_RESTART.get(name.replace("solve", "restart"))
    row_sums = PPR_INIT.get(f"gj_row_sums_{name[-3:]}")
    n, m, nb, stride = G.n, G.m, cost.blocks, row_stride(G.n, cost)
    indptr, indices = G.indptr, G.indices  # not G: a run kept by the graph must not hold it (a cycle)
    if batch * stride > MAX_ITEMS:
        most = MAX_ITEMS // stride
        raise ValueError(
            f"a batch of {batch} sources needs {batch * stride} residues, over the int32 "
            f"item limit {MAX_ITEMS}: use at most {most} sources per batch"
        )
    if batch * static_max >= 2**31:  # the device sums pull's statistics of all rows in 32 bits
        raise ValueError(
            f"a batch of {batch} sources overflows the cost model's counters on this graph: "
            f"use at most {(2**31 - 1) // static_max} sources per batch"
        )
    resident = resident_blocks(kernel, cost.lanes * cost.warps)
    if resident is not None and resident < nb:
        raise RuntimeError(
            f"the PPR solver's cooperative grid of {nb} blocks does not fit at once on this "
            f"GPU (at most {resident}): give the cost model fewer blocks"
        )
    size = batch * stride
    r, msg, msg2 = cp.empty((3, size), dtype=T)  # written whole by each run's init kernel
    r_in = cp.zeros(size, dtype=T)  # zero between iterations: the merge clears what the push added
    front, front2, touched = (cp.empty(size, dtype=np.int32) for _ in range(3))
    rdw, sqw = cp.zeros(nb * (1 + cost.warps), np.uint32), cp.zeros(nb * (1 + cost.warps), np.uint32)
    dm, src_dev = cp.zeros(2 * batch, np.float64), cp.zeros(batch, np.int32)
    from cupyx import empty_pinned  # host copies: sources go up, results come down, one sync in all

    # counters, each row's residue and the trace in one buffer: its head comes back in one copy
    res_bytes = -(-batch * np.dtype(T).itemsize // 16) * 16
    head = 32 + res_bytes + HEAD_ROWS * 40
    blob, h_blob = cp.zeros(32 + res_bytes + TRACE * 40, np.uint8), empty_pinned(head, np.uint8)
    cnt, h_cnt = blob[:32].view(np.int32), h_blob[:32].view(np.int32)
    res_dev, h_res = blob[32 : 32 + res_bytes].view(T), h_blob[32 : 32 + res_bytes].view(T)
    trace = blob[32 + res_bytes :].view(np.float64).reshape(TRACE, 5)
    h_trace = h_blob[32 + res_bytes :].view(np.float64).reshape(HEAD_ROWS, 5)
    h_src = empty_pinned(batch, np.int32)
    wb = cost.lanes * cost.warps
    magic = np.uint64(-(-(2**64) // stride))  # ceil(2**64 / stride): the kernel's row of an item
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    args = [
        indptr,
        indices,
        tptr,
        tind,
        deg,
        np.int32(n),
        cnt,
        r,
        r_in,
        None,
        msg,
        msg2,
        front,
        front2,
        touched,
        dm,
        rdw,
        sqw,
        sblk,
        swrp,
        np.int32(nb),
        src_dev,
        None,
        np.int32(stride),
        magic,
        None,
        None,
        None,
        None,
        None,
        np.float64(cost.l1),
        np.float64(cost.l2),
        np.float64(cost.l3),
        None,
        np.int32(dmax),
        trace,
        np.int32(TRACE),
        bptr,
        bv,
    ]

    def run(sources, limit: int, mode: int, alpha: float, tol: float, r_max: float | None = None):
        src = np.asarray(sources, dtype=np.int64).reshape(-1)
        ns = len(src)
        if not 1 <= ns <= batch:
            raise ValueError(f"this solver takes 1 to {batch} sources per run, got {ns}")
        used = ns * stride
        h_src[:ns] = src
        src_dev[:ns].set(h_src[:ns])
        rdw0, first, light = 0.0, mode, 2**31 - 1
        if mode == HYBRID:  # the first decision: the sources alone, nothing received (pull reads every row)
            rdw0 = frontier_rdw(deg_host[src], cost)
            first = cost.choose(rdw0, ns * rdr, ns * rdr)
            light = light_degree(cost, ns * rdr, dmax)
        p = cp.empty(used, dtype=T)
        init(
            (min(-(-used // 256), 8 * nb),),
            (256,),
            (
                deg,
                src_dev,
                np.int32(ns),
                np.int32(stride),
                r,
                msg,
                msg2,
                p,
                front,
                dm,
                cnt,
                trace,
                res_dev,
                np.int32(first),
                np.float64(rdw0),
                np.float64(ns * rdr),
                np.float64(alpha),
            ),
        )
        args[9], args[22], args[27] = p, np.int32(ns), np.int32(min(limit, 2**31 - 1))
        args[29], args[33] = np.float64(ns * rdr), np.int32(light)
        theta = r_max if r_max is not None else first_threshold(tol, m, n)
        args[25], args[26], args[28] = np.float64(alpha), np.float64(theta), np.int32(mode)
        # push or pull alone make no decision: null statistics arrays, the kernel skips their atomics
        args[16], args[17] = (rdw, sqw) if mode == HYBRID else (np.uint64(0), np.uint64(0))
        start.record()
        for _ in range(MAX_EPOCHS):  # an epoch runs to an empty active set at theta (epochs.py)
            kernel((nb,), (wb,), tuple(args))
            stop.record()
            row_sums((min(-(-stride // 256), nb), ns), (256,), (r, np.int32(stride), res_dev))
            blob[:head].get(out=h_blob, blocking=False)
            cp.cuda.get_current_stream().synchronize()
            f, it = int(h_cnt[0]), int(h_cnt[4])
            worst = float(h_res[:ns].max()) + rounding(it, T, T)
            if f or r_max is not None or worst <= tol:
                break
            theta = next_threshold(theta, worst, tol, floor_threshold(tol, m, n))
            if theta is None:
                break
            h_cnt[:7] = (0, 0, 0, PUSH | WANTED, it - 1, 0, 0)  # the restart's frontier: iteration it - 1's
            cnt[:7].set(h_cnt[:7])
            dm[ns : 2 * ns].fill(0.0)
            restart(
                (min(-(-used // 256), 8 * nb),),
                (256,),
                (
                    deg,
                    np.int32(n),
                    cnt,
                    r,
                    msg,
                    msg2,
                    front if (it - 1) & 1 else front2,
                    dm[ns:],
                    res_dev,
                    src_dev,
                    np.int32(ns),
                    np.int32(stride),
                    magic,
                    np.float64(tol),
                    np.float64(theta),
                    np.int32(light),
                    np.float64(alpha),
                ),
            )
            res_dev.fill(0)
            args[26] = np.float64(theta)
        run.last_kernel_ms = cp.cuda.get_elapsed_time(start, stop)
        rows = min(it, TRACE)  # per iteration, as _ppr_push_cpu.solve's trace
        run.last_trace = h_trace[:rows].copy() if rows <= HEAD_ROWS else trace[:rows].get()
        models = "".join("PL"[int(m) == PULL] for m in run.last_trace[:, 0])
        done = not f and (r_max is not None or worst <= tol)
        return p.reshape(ns, stride)[:, :n], (it if done else None), models, h_res[:ns].copy()

    return run


def reused_solver(G, mode: int, alpha: float, tol: float, dtype, cost, batch: int = 1, r_max=None):
    """``solver``'s run on the workspace kept by the graph for the next call of the same dtype, grid
    and batch, whatever its model, alpha and tol (each call saves the workspace's set-up); one idle
    per graph: concurrent runs (threads) each get their own."""
    slot = G.derived("ppr_solver_idle", lambda g: [threading.Lock(), None])
    key = (np.dtype(dtype).str, cost, batch)

    def run(sources, limit: int):
        with slot[0]:
            idle, slot[1] = slot[1], None
        work = idle[1] if idle and idle[0] == key else workspace(G, dtype, cost, batch)
        out = work(sources, limit, mode, alpha, tol, r_max)
        with slot[0]:  # after a run that ended: the kernel left r_in and the counters cleared
            slot[1] = (key, work)
        return out

    return run
