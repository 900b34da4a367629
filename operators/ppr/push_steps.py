"""Device steps of the GPU push/pull PPR solver: push and merge of one iteration, the cost model's
statistics and the choice of the next model (``gj_ppr_next``), as CUDA C++ that ``_ppr_push_gpu`` launches
(the pull step is in ``_ppr_pull_steps``).

A batch of ``ns`` sources shares one iteration: the residue matrix is ``ns`` rows of ``stride``
entries (``stride`` >= n, a multiple of B * nb so that every row assigns its vertices to the
same blocks and warps), and an *item* ``k * stride + v`` is vertex v of source k. Frontiers, touched
lists and residues hold items; one source is the batch of one.
Slot q (frontier position or item) belongs to warp q % B of logical block (q / B) % nb, as the
cost model assumes; a warp takes a vertex of fewer than W * B edges, the whole block a larger one.
Null statistics arrays (push or pull alone) skip the statistics' atomics. The hybrid counts pull's
statistics as it runs; after a push it first tries a bound (``gj_ppr_next``) and counts push's
statistics in a pass of their own (``gj_push_stats``) only when the bound leaves the choice open.
"""

from operators.ppr.cost import HYBRID, LANES, PULL, PUSH, WARPS

WANTED = 2  # a bit of the counters' state (cnt[3], beside the model): push's statistics are wanted now
# the defines of every Kernel whose source has PPR_STEP_DEVICE: W lanes of a warp, B warps of a block (the
# cost model's), the solver modes and the WANTED bit
STEP_DEFINES = {"W": LANES, "B": WARPS, "PUSH": PUSH, "PULL": PULL, "HYBRID": HYBRID, "WANTED": WANTED}

PPR_STEP_DEVICE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define WB (W * B)
#define RED_B 9u  // 1 + log2(W * B): a block reduction
#define RED_W 6u  // 1 + log2(W): a warp reduction
// cnt[3] (the model) also holds WANTED (push's statistics are wanted now: a define from Python)
#define COUNTING 4  // or: the next merge counts them
typedef unsigned int u32;
// Statistics: rdw[blk] and rdw[blocks + warp], sqw likewise; counters: f_cur, f_next, touched count.
__device__ __forceinline__ void gj_add_slot(u32* st, int nb, long long q, u32 cb, u32 cw) {
    if (st == nullptr) return;  // push or pull alone: no decision to make, no statistics
    long long blk = (q / B) % nb;
    atomicAdd(&st[blk], cb);
    atomicAdd(&st[nb + blk * B + q % B], cw);
}
typedef unsigned long long u64;
// lanes with `heavy` (an active vertex of out-degree above the bound's limit) counted in *n
__device__ __forceinline__ void gj_count(bool heavy, int* n) {
    const unsigned mask = __ballot_sync(0xffffffffu, heavy);
    if (mask && (threadIdx.x & 31) == __ffs(mask) - 1) atomicAdd(n, __popc(mask));
}
// The batch: its sources, rows of `stride` entries, magic = ceil(2**64 / stride) (exact division of
// any int32 item by a multiply-high, since stride < 2**33). MANY = false compiles the batch of one:
// item = vertex, with no row arithmetic (fewer registers in the single-source solve).
struct Rows { const int* src; u64 magic; int ns, stride; };
template <bool MANY>
__device__ __forceinline__ int gj_row(const Rows& R, int x) {
    return MANY ? (int)__umul64hi((u64)x, R.magic) : 0;
}
template <bool MANY>
__device__ __forceinline__ int gj_vertex(const Rows& R, int x) {
    return MANY ? x - gj_row<MANY>(R, x) * R.stride : x;
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
// item u of out-degree d; dm_next: the dangling mass of u's source
template <typename T>
__device__ __forceinline__ void gj_activate(int u, int d, T ru, long long q, int* front2, T* msg,
        double* dm_next, u32* rdw, int nb, double alpha) {
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
// every frontier item sends alpha r / d_out to its out-neighbours (same row); dangling mass to sources
template <typename T, bool MANY>
__device__ void gj_push(const long long* indptr, const int* indices, const int* front, int* cnt, T* r,
        T* r_in, T* p, T* msg, int* touched, const double* dm, const Rows R, double alpha) {
    __shared__ int s_v[B];
    __shared__ T s_m[B];
    const int warp = threadIdx.x / W, lane = threadIdx.x % W, f = cnt[0];
    for (int k0 = 0; blockIdx.x == 0 && warp == 0 && k0 < R.ns; k0 += W) {
        int k = k0 + lane;
        double d = k < R.ns ? dm[k] : 0.0;
        gj_send<T>(k < R.ns ? k * R.stride + R.src[k] : 0, (T)(alpha * d), r_in, touched, cnt, d > 0.0);
    }
    for (long long base = (long long)blockIdx.x * B; base < f; base += (long long)gridDim.x * B) {
        long long q = base + warp;
        int x = q < f ? front[q] : -1, v = x >= 0 ? gj_vertex<MANY>(R, x) : 0, row = x - v;
        long long lo = x >= 0 ? indptr[v] : 0, hi = x >= 0 ? indptr[v + 1] : 0;
        T m = (T)0;
        if (x >= 0 && lane == 0) m = gj_claim<T>(x, r, p, msg, alpha);
        m = __shfl_sync(0xffffffffu, m, 0);
        bool big = hi - lo >= WB;
        if (lane == 0) { s_v[warp] = big ? x : -1; s_m[warp] = m; }
        if (!big)
            for (long long e0 = lo; e0 < hi; e0 += W)
                gj_send<T>(row + indices[e0 + lane < hi ? e0 + lane : lo], m, r_in, touched, cnt,
                           e0 + lane < hi);
        __syncthreads();
        for (int j = 0; j < B; ++j) {
            int y = s_v[j];
            if (y < 0) continue;
            int u = gj_vertex<MANY>(R, y), ru = y - u;
            long long a = indptr[u], z = indptr[u + 1];
            for (long long e0 = a; e0 < z; e0 += WB) {
                long long e = e0 + threadIdx.x;
                gj_send<T>(ru + indices[e < z ? e : a], s_m[j], r_in, touched, cnt, e < z);
            }
        }
        __syncthreads();
    }
}
// received mass merged into the residues, the next frontier (heavy members counted in cnt[6]); push's
// statistics when rdw and sqw are given (the hybrid, when the bound is not expected to settle the choice)
template <typename T, bool MANY>
__device__ void gj_merge(const int* deg, int* cnt, T* r, T* r_in, T* msg, const int* touched, int* front2,
        double* dm_next, u32* rdw, u32* sqw, int nb, int light, const Rows R, double alpha, double tol) {
    const int t = cnt[2];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i0 = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31); i0 < t; i0 += step) {
        long long i = i0 + (threadIdx.x & 31);
        bool on = false;
        int u = 0;
        T ru = (T)0;
        int d = 0;
        if (i < t) {
            u = touched[i];
            gj_add_slot(sqw, nb, u, RED_B, RED_W);
            ru = r[u] + r_in[u];
            r_in[u] = (T)0;
            r[u] = ru;
            d = deg[gj_vertex<MANY>(R, u)];
            on = (double)ru > tol * (d > 1 ? d : 1);
        }
        long long q = gj_append(on, &cnt[1]);
        gj_count(on && d > light, &cnt[6]);
        if (on) gj_activate<T>(u, d, ru, q, front2, msg, dm_next + gj_row<MANY>(R, u), rdw, nb, alpha);
    }
}
// push's statistics, when the merge did not count them and the bound did not settle the choice: sqw of
// the vertices that received mass (the touched list), rdw of the next frontier by its slots
template <bool MANY>
__device__ void gj_push_stats(const int* deg, const int* cnt, const int* touched, const int* front2, u32* rdw,
        u32* sqw, int nb, const Rows R) {
    const int t = cnt[2], f = cnt[1];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < t; i += step)
        gj_add_slot(sqw, nb, touched[i], RED_B, RED_W);
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < f; q += step) {
        const int d = deg[gj_vertex<MANY>(R, front2[q])];
        gj_add_slot(rdw, nb, q, (u32)((d + WB - 1) / WB), (u32)((d + W - 1) / W));
    }
}
// The last block to finish an iteration picks the next model (the hybrid: push when Psi < 0), writes its
// trace row (model, Phi_rdw, Phi_sqw, frontier size, bounded) and moves the counters on. After a push,
// a block holds at most B * per of the next frontier's f vertices and a warp per of them (slots go
// round-robin, per = ceil(f / (B nb))), each of out-degree at most `light` if none was heavy (cnt[6]),
// else `dmax`: Phi_rdw <= per (B ceil(top / WB) + ceil(top / W)), and Phi_sqw >= Phi_rdr. If the merge
// did not count push's statistics and this bound gives Psi < 0, push is certain (a bounded row);
// otherwise they are WANTED (gj_push_stats, then this again), and the next merge is COUNTING them
// unless the bound held. Pull counts its own. sblk, swrp: pull's fixed part of one row, ns times.
__device__ __noinline__ void gj_ppr_next(u32* rdw, u32* sqw, const u32* sblk, const u32* swrp, int nb,
        int ns, int* cnt, double* dm, double* trace, int ntrace, int mode, double rdr, double l1, double l2,
        double l3, int light, int dmax, bool pushed, bool counted) {
    __shared__ u32 s_r[B], s_q[B];
    __shared__ double s_ub;
    __shared__ bool s_open;
    volatile int* c = cnt;
    const bool stats = rdw != nullptr;  // the hybrid
    bool count_next = stats;  // thread 0's: the next merge counts push's statistics (after a pull, too)
    int4 lo = make_int4(0, 0, 0, 0), hi = lo;
    if (threadIdx.x == 0) {
        lo = __ldcg(reinterpret_cast<const int4*>(cnt));  // the counters at once (loads in order are slow)
        hi = __ldcg(reinterpret_cast<const int4*>(cnt) + 1);
        s_open = false;
        s_ub = -1.0;
        if (stats && pushed) {
            const long long per = ((long long)lo.y + B * nb - 1) / (B * nb), top = hi.z == 0 ? light : dmax;
            const double ub = (double)(per * (B * ((top + WB - 1) / WB) + (top + W - 1) / W));
            const bool fits = l1 * ub - (l2 + l3) * rdr < 0.0;
            if (fits && !counted) s_ub = ub;
            else if (!counted) { s_open = true; c[5] = 0; c[3] = PUSH | WANTED; }
            count_next = !fits;
        }
    }
    __syncthreads();
    if (s_open) return;
    const bool bounded = s_ub >= 0.0;
    if (stats && !bounded) {
        u32 br = 0, bq = 0;
        for (int i = threadIdx.x; i < nb; i += WB) {  // written by other SMs: read from L2
            // a block's 8 warp counters are 2 x 16 bytes (nb % 4 == 0): 6 vector loads, all in flight
            const uint4* rw = reinterpret_cast<const uint4*>(rdw + nb + i * B);
            const uint4* qw = reinterpret_cast<const uint4*>(sqw + nb + i * B);
            const uint4* sw = reinterpret_cast<const uint4*>(swrp + i * B);
            const uint4 r0 = __ldcg(rw), r1 = __ldcg(rw + 1), q0 = __ldcg(qw), q1 = __ldcg(qw + 1);
            const uint4 s0 = sw[0], s1 = sw[1];
            const u32 rb = __ldcg(&rdw[i]), qb = __ldcg(&sqw[i]);
            u32 wr = max(max(max(r0.x, r0.y), max(r0.z, r0.w)), max(max(r1.x, r1.y), max(r1.z, r1.w)));
            u32 wq = max(max(ns * s0.x + q0.x, ns * s0.y + q0.y), max(ns * s0.z + q0.z, ns * s0.w + q0.w));
            wq = max(wq, max(max(ns * s1.x + q1.x, ns * s1.y + q1.y),
                             max(ns * s1.z + q1.z, ns * s1.w + q1.w)));
            br = max(br, rb + wr);
            bq = max(bq, ns * sblk[i] + qb + wq);
        }
        for (int o = 16; o > 0; o >>= 1) {  // the warp's largest, then the block's
            br = max(br, __shfl_xor_sync(0xffffffffu, br, o));
            bq = max(bq, __shfl_xor_sync(0xffffffffu, bq, o));
        }
        if (threadIdx.x % W == 0) { s_r[threadIdx.x / W] = br; s_q[threadIdx.x / W] = bq; }
        __syncthreads();
        for (int i = threadIdx.x; i < nb * (1 + B) / 4; i += WB) {  // reset for the next one
            reinterpret_cast<uint4*>(rdw)[i] = make_uint4(0u, 0u, 0u, 0u);
            reinterpret_cast<uint4*>(sqw)[i] = make_uint4(0u, 0u, 0u, 0u);
        }
        if (threadIdx.x == 0)
            for (int j = 1; j < B; ++j) { s_r[0] = max(s_r[0], s_r[j]); s_q[0] = max(s_q[0], s_q[j]); }
    }
    if (threadIdx.x == 0) {
        const double phi_r = bounded ? s_ub : stats ? (double)s_r[0] : 0.0;
        const double phi_q = bounded ? rdr : stats ? (double)s_q[0] : 0.0;
        int it = hi.x + 1, model = mode;
        if (mode == HYBRID) model = bounded || l1 * phi_r - l2 * rdr - l3 * phi_q < 0.0 ? PUSH : PULL;
        if (it < ntrace) {
            double* row = trace + 5 * it;
            row[0] = model; row[1] = phi_r; row[2] = phi_q; row[3] = lo.y; row[4] = bounded;
        }
        c[0] = lo.y; c[1] = 0; c[2] = 0; c[3] = model | (count_next ? COUNTING : 0); c[4] = it; c[5] = 0;
        c[6] = 0;
    }
    for (int k = threadIdx.x; k < ns; k += WB) {  // each source's dangling mass: next becomes current
        volatile double* d = dm;
        d[k] = d[ns + k];
        d[ns + k] = 0.0;
    }
}
"""
