"""GPU forward push of the top-k PPR query (ParallelAFP, Alg. 2): the device helpers both schedules
share, and the persistent schedule (the paper's, a launch per frontier, is ``_topk_gpu_frontier``).

Both claim a frontier vertex's residue (atomicExch) and add alpha r(u) / d_out(u) to each
out-neighbour with atomicAdd; a vertex joins the next frontier once, guarded by bit 0 of ``mark``
(appends are warp-aggregated: one atomicAdd per group of lanes appending together). A receiver
whose bit 1 is clear gets it (an atomicOr whose result is not read) and a 1 in ``seen``; after the
push ``_topk_gpu_seen.list_seen`` rebuilds the touched list from those flags in vertex order, so every
later reset and scan costs O(touched), not O(n). A claim sets bit 2 (the reserve pi0 written): the
round's candidates pass reads pi0, and the next start clears it, only there: few of the touched
vertices are claimed, so both skip most reads and writes of pi0.

``push_persistent``: one cooperative launch runs every frontier of the round. Per frontier, each
thread claims a contiguous slice of it and numbers its edges within its block (a block-wide prefix
sum over the out-degrees); after one grid barrier every block turns the blocks' edge counts into
their starts in shared memory, and each warp takes chunks of consecutive edges, finding the block
and then the frontier vertex whose range holds its first edge by binary search and the others by
stepping ahead: a hub's edges spread over every SM, and a small frontier costs two grid barriers
rather than a launch and a host read. The shares of dangling vertices reach the source after every
claim of the frontier, so the pushes do not depend on the threads' order.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.blocks import SCAN_CUDA
from operators._gpu.device import sm_count
from operators._gpu.launch import resident_blocks
from operators._gpu.registry import Kernel
from operators.topk.gpu.args import LaunchArgs

THREADS = 256
# persistent push: edges of a lane whose atomic adds are in flight together, and blocks per SM (85
# registers; 4 per SM would spill); tuned on the benchmark graphs (benchmarks/RESULTS.md, top-k section)
PUSH_BATCH, PUSH_PER_SM = 2, 3
QP_RMAX, QP_TAU, QP_S = 0, 1, 2  # RoundParams.qp, as GJ_QP_* in the kernels

VERTEX_CUDA = r"""
// a vertex's query state in one 16-byte record, so that a pushed edge reads one random sector (in three
// arrays, three): its residue, its push threshold d_out(v) beta(v)
// as a float rounded down (GPUQuery.load_thresholds) and its flags (bit 0: next frontier, 1: touched,
// 2: claimed, so that the reserve pi0 is read and cleared only where one was written)
struct __align__(16) gj_vertex { double r; float thr; int mark; };
"""
# a query's parameters of the round in device memory (RoundParams.qp), so that the round's launches can be
# replayed as a CUDA graph: r_max, tau, the source; the defines of every Kernel whose source has VERTEX_CUDA
VERTEX_DEFINES = {"GJ_QP_RMAX": QP_RMAX, "GJ_QP_TAU": QP_TAU, "GJ_QP_S": QP_S}

PUSH_DEVICE = (
    VERTEX_CUDA
    + r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ __forceinline__ void gj_append(int* list, int* count, int value) {
    cg::coalesced_group g = cg::coalesced_threads();
    int base = 0;
    if (g.thread_rank() == 0) base = atomicAdd(count, (int)g.size());
    list[g.shfl(base, 0) + (int)g.thread_rank()] = value;
}
// PUSH_BATCH edges of one lane at once: every atomic add, then every flag test, so that a lane keeps
// PUSH_BATCH adds in flight rather than waiting on each one's result (targets may repeat: the atomicOr
// of bit 0 still lets one of them append)
__device__ __forceinline__ void gj_push_batch(const int* w, const double* inc, int cnt, gj_vertex* vs,
        double rmax, unsigned char* seen, int* next, int* ncount) {
    double now[PUSH_BATCH];
    int m[PUSH_BATCH];
    float t[PUSH_BATCH];
#pragma unroll
    for (int u = 0; u < PUSH_BATCH; ++u)
        if (u < cnt) now[u] = atomicAdd(&vs[w[u]].r, inc[u]) + inc[u];
#pragma unroll
    for (int u = 0; u < PUSH_BATCH; ++u)
        if (u < cnt) { m[u] = *((volatile int*)&vs[w[u]].mark); t[u] = vs[w[u]].thr; }
#pragma unroll
    for (int u = 0; u < PUSH_BATCH; ++u) {
        if (u >= cnt) continue;
        if (!(m[u] & 2)) { atomicOr(&vs[w[u]].mark, 2); seen[w[u]] = 1; }  // result not read: a reduction
        if (!(m[u] & 1) && now[u] > t[u] * rmax && !(atomicOr(&vs[w[u]].mark, 1) & 1))
            gj_append(next, ncount, w[u]);
    }
}
// one edge (the paper's schedule, a dangling vertex's share to the source)
__device__ __forceinline__ void gj_push_one(int w, double inc, gj_vertex* vs, double rmax,
        unsigned char* seen, int* next, int* ncount) {
    gj_push_batch(&w, &inc, 1, vs, rmax, seen, next, ncount);
}
// claim frontier vertex u: its reserve grows, returns alpha * r(u) / d_out; a dangling vertex's share
// goes to s, or to *dangling when given (added to s once every claim of the frontier is done)
__device__ __forceinline__ double gj_claim(int u, int s, double alpha, gj_vertex* vs, double* pi0,
        const long long* indptr, double rmax, unsigned char* seen, int* next, int* ncount, long long* deg,
        double* dangling = nullptr) {
    if (!(atomicAnd(&vs[u].mark, ~1) & 4)) atomicOr(&vs[u].mark, 4);  // bit 2: pi0(u) written this query
    double ru = __longlong_as_double((long long)atomicExch((unsigned long long*)&vs[u].r, 0ULL));
    pi0[u] += (1.0 - alpha) * ru;
    *deg = indptr[u + 1] - indptr[u];
    if (*deg == 0) {
        if (dangling) atomicAdd(dangling, alpha * ru);
        else gj_push_one(s, alpha * ru, vs, rmax, seen, next, ncount);
        return 0.0;
    }
    return alpha * ru / (double)*deg;
}
// touched vertices above their threshold join the frontier (a round's first frontier)
__device__ __forceinline__ void gj_regenerate(long long i, const int* touched, gj_vertex* vs, double rmax,
        int* next, int* ncount) {
    int u = touched[i];
    if (vs[u].r > vs[u].thr * rmax && !(atomicOr(&vs[u].mark, 1) & 1)) gj_append(next, ncount, u);
}
"""
)
# the defines of every Kernel whose source has PUSH_DEVICE (GJ_T: threads of its blocks)
PUSH_DEFINES = {**VERTEX_DEFINES, "PUSH_BATCH": PUSH_BATCH, "GJ_T": THREADS}

PERSISTENT_CUDA = r"""
// Every frontier of one round in one cooperative launch (grid-wide barriers between the steps).
// fcount[0..1]: the two frontiers' sizes, [3] the touched list's; stats[0..2] += pushes, frontiers, edges.
extern "C" __global__ void __launch_bounds__(GJ_T, PUSH_PER_SM) gj_afp_push_persistent(
        const long long* indptr, const int* indices, const double* qp, double alpha, gj_vertex* vs,
        double* pi0, const int* touched, unsigned char* seen, int* front, long long n, int* fcount,
        double* val, long long* off, long long* shift, long long* bsum, double* dangling,
        unsigned long long* stats) {
    cg::grid_group grid = cg::this_grid();
    const double rmax = qp[GJ_QP_RMAX];
    const int s = (int)qp[GJ_QP_S];
    __shared__ long long s_start[MAX_BLOCKS + 1];
    const long long nthreads = (long long)gridDim.x * GJ_T, tid = (long long)blockIdx.x * GJ_T + threadIdx.x;
    if (tid == 0) fcount[0] = fcount[1] = 0;
    grid.sync();
    const int nt0 = fcount[3];  // the touched list's length (GPUQuery.counts)
    for (long long i = tid; i < nt0; i += nthreads)
        gj_regenerate(i, touched, vs, rmax, front, fcount);
    grid.sync();
    unsigned long long pushes = 0, frontiers = 0, edge_count = 0;
    for (int cur = 0;; cur ^= 1) {
        const int F = *((volatile int*)&fcount[cur]);
        if (F == 0) break;
        int *fr = front + cur * n, *nx = front + (cur ^ 1) * n, *ncount = fcount + (cur ^ 1);
        // claim a contiguous slice of the frontier
        const int per = (int)((F + nthreads - 1) / nthreads), lo = (int)min(tid * per, (long long)F);
        const int hi = min(lo + per, F);
        long long mine = 0, btotal;
        for (int i = lo; i < hi; ++i) {
            long long d;
            val[i] = gj_claim(fr[i], s, alpha, vs, pi0, indptr, rmax, seen, nx, ncount, &d, dangling);
            off[i] = d;
            mine += d;
        }
        // offsets within the block, known before the barrier: edge e of entry i is indices[shift[i] + e]
        // for e counted from the block's first edge
        long long at = gj_block_scan(mine, &btotal);
        for (int i = lo; i < hi; ++i) {
            long long d = off[i];
            off[i] = at;
            shift[i] = indptr[fr[i]] - at;
            at += d;
        }
        if (threadIdx.x == 0) bsum[blockIdx.x] = btotal;
        grid.sync();
        if (tid == 0) {
            fcount[cur] = 0;  // read by every thread before the barrier; the next frontier but one
            const double x = *dangling;  // after s's own claim, whatever the threads' order
            *dangling = 0.0;
            if (x > 0.0) gj_push_one(s, x, vs, rmax, seen, nx, ncount);
        }
        {  // every block numbers the blocks' edges: s_start[b] = edges of the blocks before b
            const int nb = gridDim.x, each = (nb + GJ_T - 1) / GJ_T;
            const int b0 = min((int)threadIdx.x * each, nb), b1 = min(b0 + each, nb);
            long long sum = 0, all;
            for (int b = b0; b < b1; ++b) sum += bsum[b];
            long long at = gj_block_scan(sum, &all);
            for (int b = b0; b < b1; ++b) { s_start[b] = at; at += bsum[b]; }
            if (threadIdx.x == 0) s_start[nb] = all;
            __syncthreads();
        }
        const long long edges = s_start[gridDim.x];
        const int bper = per * GJ_T;  // frontier entries per block
        // push the frontier's edges, a chunk of consecutive ones per warp (lane l takes base + l + 32 j;
        // up to CHUNK, fewer when the frontier has too few edges to keep every warp busy): the block
        // holding e by a binary search of s_start, the owner of e in it (the last i with off[i] <= e
        // less the block's start) by one binary search per chunk, then both by steps ahead
        const long long warps = nthreads >> 5;
        const long long chunk = max(32LL, min((long long)CHUNK, ((edges + warps - 1) / warps + 31) & ~31LL));
        for (long long base = (tid >> 5) * chunk; base < edges; base += warps * chunk) {
            long long e = base + (threadIdx.x & 31);
            if (e >= edges) break;
            int bk = 0, bl = gridDim.x;
            while (bl - bk > 1) { int mid = (bk + bl) >> 1; if (s_start[mid] <= e) bk = mid; else bl = mid; }
            long long blo = s_start[bk], bhi = s_start[bk + 1];
            int a = bk * bper, z = min(a + bper, F);
            for (int b = z; b - a > 1;) {
                int mid = (a + b) >> 1;
                if (off[mid] <= e - blo) a = mid; else b = mid;
            }
            for (long long stop = min(base + chunk, edges); e < stop; e += 32 * PUSH_BATCH) {
                int w[PUSH_BATCH], cnt = 0;
                double inc[PUSH_BATCH];
#pragma unroll
                for (int u = 0; u < PUSH_BATCH; ++u) {
                    const long long eu = e + 32 * u;
                    if (eu >= stop) break;
                    while (eu >= bhi) {  // into the next block with edges
                        ++bk;
                        blo = bhi;
                        bhi = s_start[bk + 1];
                        a = bk * bper;
                        z = min(a + bper, F);
                    }
                    while (a + 1 < z && off[a + 1] <= eu - blo) ++a;
                    w[u] = indices[shift[a] + eu - blo];
                    inc[u] = val[a];
                    cnt = u + 1;
                }
                gj_push_batch(w, inc, cnt, vs, rmax, seen, nx, ncount);
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
MAX_BLOCKS = 1024  # blocks of the persistent push at most (s_start lives in shared memory)
PERSISTENT_KERNEL = PUSH_DEVICE + SCAN_CUDA + PERSISTENT_CUDA

# gj_afp_push_persistent may spill 12 bytes (nvcc, sm_90) at PUSH_PER_SM blocks per SM
PERSISTENT = Kernel(
    PERSISTENT_KERNEL,
    ("gj_afp_push_persistent",),
    defines={**PUSH_DEFINES, "CHUNK": CHUNK, "MAX_BLOCKS": MAX_BLOCKS, "PUSH_PER_SM": PUSH_PER_SM},
    spill_budget={"gj_afp_push_persistent": 12},
    cooperative=True,
    label="topk-push-persistent",
)


def persistent_kernel():
    return PERSISTENT.get("gj_afp_push_persistent")


def persistent_blocks(streams: int = 1) -> int:
    """Blocks of the persistent push: as many as stay resident at once, shared by ``streams`` queries
    in flight (a cooperative grid must be resident as a whole)."""
    resident = resident_blocks(persistent_kernel(), THREADS)
    if resident is None:  # no occupancy call in this CuPy: __launch_bounds__ guarantees PUSH_PER_SM
        resident = PUSH_PER_SM * sm_count()
    return max(1, min(resident, MAX_BLOCKS) // max(1, streams))


class RoundParams:
    """The round's r_max, tau and source (``QP_*``) in device memory (``qp``), which the round's kernels read
    so that a captured round serves every round of its configuration: written on the host (pinned memory)
    and copied to ``qp`` on the current stream before the next kernel that reads them, one copy for the
    values set since the last (inside a captured round the copy runs with the graph, from what the host
    wrote last)."""

    def __init__(self) -> None:
        cp = import_cupy()
        self.qp = cp.zeros(4, dtype=cp.float64)
        self.host = np.frombuffer(cp.cuda.alloc_pinned_memory(32), dtype=np.float64, count=4)
        self.copy = (self.qp.data.ptr, self.host.ctypes.data, 32)  # memcpyAsync's pointers and size
        self.sent = False  # qp holds host's values (or their copy is queued)

    def set(self, i: int, value) -> None:
        """Parameter ``i`` (QP_RMAX, QP_TAU, QP_S), sent by the next ``send()``."""
        if self.host[i] != value:
            self.host[i] = value
            self.sent = False

    def set_round(self, rmax: float, tau: float, s: int) -> None:
        """All three for a round queued as a whole: its first launch sends them (inside its graph)."""
        self.host[:3] = (rmax, tau, s)
        self.sent = False

    def send(self) -> None:
        if not self.sent:
            cp = import_cupy()
            stream = cp.cuda.get_current_stream().ptr
            cp.cuda.runtime.memcpyAsync(*self.copy, cp.cuda.runtime.memcpyHostToDevice, stream)
            self.sent = True

    def close(self) -> None:
        self.qp = self.host = self.copy = None
        self.sent = False


class PushState:
    """A query's vertex state and the push's buffers, for a graph of n vertices.

    ``state``: the gj_vertex records (residue, float threshold, flags), ``r`` viewing their residues for
    CuPy code, ``thr32`` their thresholds (for the dense clear) and ``adaptive`` which ones they are;
    ``pi0`` the reserves; ``seen_words`` a byte per vertex that received a push (whole 16-byte words,
    the bytes past n never written; ``seen`` its first n), from which ``touched`` is listed after each
    push (``_topk_gpu_seen.list_seen``, its per-tile counts in ``seen_tiles``); the two frontiers, the
    big-vertex list and per-entry values (``big``, ``bigval``: also the persistent push's per-frontier
    values, Alg. 4's scratch and the refinement's dense estimates), the persistent push's offsets and
    block sums (``off``, ``shift``: also Alg. 4's scratch; ``bsum``) and dangling share.

    ``counts``: [0:3] frontier sizes (a ring in ``push_frontiers``; [0:2] in the persistent push),
    [3] touched (listed from ``seen`` after each push), [4:6] big-vertex lists, [6] candidates,
    [7] unused (cleared with [6]). ``stats``: the query's pushes, frontiers and edges pushed.
    """

    def __init__(self, index, params: RoundParams, sm_blocks: int, blocks: int) -> None:
        cp = import_cupy()
        g = index.graph
        n = g.n
        self.index = index
        self.params = params  # the engine's, read by the push's kernels
        self.sm_blocks = sm_blocks  # the device's SMs: grids are multiples of it
        self.max_degree = int(cp.diff(g.indptr).max()) if n else 0
        self.state = cp.zeros(2 * n, dtype=cp.float64)
        self.r = self.state[0::2]
        self.thr32 = cp.zeros(n, dtype=cp.float32)
        self.adaptive = None
        self.pi0 = cp.zeros(n, dtype=cp.float64)
        self.seen_words = cp.zeros(-(-n // 16) * 16, dtype=cp.uint8)
        self.seen = self.seen_words[:n]
        self.touched = cp.empty(n, dtype=cp.int32)
        self.front = cp.empty((2, n), dtype=cp.int32)
        self.big = cp.empty(n, dtype=cp.int32)
        self.bigval = cp.empty(n, dtype=cp.float64)
        self.off = cp.empty(n + 1, dtype=cp.int64)
        self.shift = cp.empty(n, dtype=cp.int64)
        self.dangling = cp.zeros(1, dtype=cp.float64)
        self.counts = cp.zeros(8, dtype=cp.int32)
        self.stats = cp.zeros(3, dtype=cp.uint64)
        self.bsum = cp.empty(blocks, dtype=cp.int64)  # blocks: the most the persistent push launches
        # ``list_seen``'s per-tile counts and starts, for tiles of at least THREADS words
        self.seen_tiles = cp.empty(2 * max(1, -(-(self.seen_words.size // 16) // THREADS)), dtype=cp.int64)
        self.args = LaunchArgs()

    def thresholds(self, adaptive: bool):
        """The push thresholds in double: d_out(v) beta(v) (``adaptive``) or d_out(v), at least 1."""
        cp = import_cupy()
        deg1 = cp.maximum(cp.diff(self.index.graph.indptr), 1).astype(cp.float64)
        return deg1 * self.index.arrays["beta"] if adaptive else deg1

    def load_thresholds(self, adaptive: bool) -> None:
        """Write ``thresholds(adaptive)`` into the records as floats rounded toward zero: a push then
        leaves every residue at most the double threshold times r_max."""
        if self.adaptive == adaptive:
            return
        cp = import_cupy()

        def make():  # once per index and kind, shared by its workspaces (no temporaries in each)
            thr = self.thresholds(adaptive)
            low = thr.astype(cp.float32)
            return cp.where(low.astype(cp.float64) > thr, cp.nextafter(low, cp.float32(0)), low)

        key = "thresholds32_adaptive" if adaptive else "thresholds32_plain"
        self.thr32[:] = self.index.cache.setdefault(key, make)
        self.state.view(cp.float32)[2::4] = self.thr32
        self.adaptive = adaptive

    def ntouched(self) -> int:
        return int(self.counts[3])

    def push_persistent(self, rmax: float, blocks: int) -> None:
        """The round's push, every frontier in one cooperative launch of ``blocks`` blocks (thresholds
        loaded)."""
        self.params.set(QP_RMAX, rmax)
        self.params.send()

        def make():
            g = self.index.graph
            return (
                g.indptr,
                g.indices,
                self.params.qp,
                np.float64(self.index.params.alpha),
                self.state,
                self.pi0,
                self.touched,
                self.seen,
                self.front,
                np.int64(g.n),
                self.counts,
                self.bigval,
                self.off,
                self.shift,
                self.bsum,
                self.dangling,
                self.stats,
            )

        persistent_kernel()((blocks,), (THREADS,), self.args.get("push", make))

    def close(self) -> None:
        """Drop the buffers (and the kernel arguments that hold them)."""
        self.args.close()
        self.state = self.r = self.thr32 = self.adaptive = self.pi0 = None
        self.seen_words = self.seen = self.touched = self.front = self.big = self.bigval = None
        self.off = self.shift = self.dangling = self.counts = self.stats = self.bsum = self.seen_tiles = None
