"""GPU (CuPy RawKernel) workspace and round of the top-k PPR query (Sec. 4 of the kPAR paper).

A round is a chain of kernels on the query's stream with the counts kept on the device: the push
(``_topk_gpu_push``), the candidates pi0(s, v) >= tau appended to a list that starts with H and the
bound reduction over H (Alg. 4), both from one pass over the touched vertices (``_topk_gpu_bound``),
the estimates of the whole list (Alg. 6) and the list's top k (``_topk_gpu_select``), which the host
reads with the round's record (candidates, returned mass) in one copy. The candidates are not sorted
by reserve as the paper's line says: every estimate is computed at once, so their order changes nothing.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.device import sm_count
from operators._gpu.registry import Kernel
from operators.topk.gpu import graph as graph_rounds
from operators.topk.gpu.bound import BY_VERTEX_H, select_and_bound_gpu
from operators.topk.gpu.entries import bound_smem_plan, segment_count
from operators.topk.gpu.estimate import compute_ppr_gpu, fallback_gpu
from operators.topk.gpu.frontier import BIG_DEGREE, TSIZE, push_frontiers
from operators.topk.gpu.lists import round_constants
from operators.topk.gpu.push import QP_S, VERTEX_CUDA, VERTEX_DEFINES, persistent_blocks, push_persistent
from operators.topk.gpu.refine import refine_launch_gpu, refine_read_gpu
from operators.topk.gpu.seen import list_seen, seen_tiles_buffer
from operators.topk.gpu.select import launch_round_top, read_round_top

THREADS = 256

# clear every vertex in order once more than n / DENSE_CLEAR were touched (scattered writes cost a few
# times sequential ones); tuned on the benchmark graphs (benchmarks/RESULTS.md, top-k section)
DENSE_CLEAR = 12
# the seen flags are cleared in order above n / DENSE_SEEN touched vertices: a flag is a byte, so a
# sequential pass covers many per sector and pays off at far fewer touched vertices
DENSE_SEEN = 128
QUERY_CUDA = r"""
// the previous query's state: its touched vertices (residue and flags, pi0 where claimed: bit 2), or
// every vertex in order once they are more than n / DENSE_CLEAR (scattered writes cost a few times
// sequential ones). In order, each record is written whole (its threshold from thr32): a warp then
// covers whole sectors, which written in part would first be read from memory. The seen flags, a byte
// per vertex, are cleared in order, 16 at a time, from n / DENSE_SEEN touched vertices on: cleared one
// by one, each is a sector read and written back
extern "C" __global__ void gj_query_clear(const int* touched, const int* ntouched, long long n, gj_vertex* vs,
        const float* thr32, double* pi0, unsigned char* seen) {
    const long long t = *ntouched, step = (long long)gridDim.x * blockDim.x;
    const long long i0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool dense = t * DENSE_CLEAR > n, seen_dense = t * DENSE_SEEN > n;
    for (long long i = i0; i < (dense ? n : t); i += step) {
        const int u = dense ? (int)i : touched[i];
        if (dense) {
            reinterpret_cast<int4*>(vs)[u] = make_int4(0, 0, __float_as_int(thr32[u]), 0);
            pi0[u] = 0.0;
        } else {
            if (vs[u].mark & 4) pi0[u] = 0.0;  // claimed: most touched vertices were not (pi0 still 0)
            vs[u].r = 0.0;
            vs[u].mark = 0;
        }
        if (!seen_dense) seen[u] = 0;
    }
    if (seen_dense) {
        uint4* words = reinterpret_cast<uint4*>(seen);
        for (long long w = i0; w < (n >> 4); w += step) words[w] = make_uint4(0, 0, 0, 0);
        for (long long v = (n & ~15LL) + i0; v < n; v += step) seen[v] = 0;
    }
}

extern "C" __global__ void gj_query_start(const double* qp, gj_vertex* vs, unsigned char* seen, int* touched,
        int* counts, unsigned long long* stats) {
    const int s = (int)qp[GJ_QP_S];
    vs[s].r = 1.0; seen[s] = 1; touched[0] = s;
    for (int i = 0; i < 8; ++i) counts[i] = 0;
    counts[3] = 1;
    stats[0] = stats[1] = stats[2] = 0;
}
"""
QUERY_KERNELS = VERTEX_CUDA + QUERY_CUDA

QUERY = Kernel(
    QUERY_KERNELS,
    ("gj_query_clear", "gj_query_start"),
    defines={**VERTEX_DEFINES, "DENSE_CLEAR": DENSE_CLEAR, "DENSE_SEEN": DENSE_SEEN},
    label="topk-query",
)


def _kernel(name):
    return QUERY.get(name)


class GPUQuery:
    """The workspace and round of Algorithm 3 on the GPU (one per calling thread, or stream, and index).

    ``counts``: [0:3] frontier sizes (a ring in ``push_frontiers``; [0:2] in the persistent push),
    [3] touched (listed from ``seen`` after each push), [4:6] big-vertex lists, [6] candidates,
    [7] unused (cleared with [6]).
    ``stats``: the query's pushes, frontiers and edges pushed.
    ``ids``: the high-IRW set H, then the round's candidates; ``est``: their estimates.
    """

    def __init__(self, index):
        cp = import_cupy()
        g, a = index.graph, index.arrays
        if g.indices.dtype != np.int32:
            raise NotImplementedError("GPU top-k PPR queries support graphs with fewer than 2**31 vertices")
        n = g.n
        self.index = index
        self.has_big = bool(n) and int(cp.diff(g.indptr).max()) > BIG_DEGREE
        self.constants = round_constants(index)
        self.inv_omega = self.constants.inv_omega
        # gj_vertex records (residue, float threshold, flags); ``r`` views the residues for CuPy code
        self.state = cp.zeros(2 * n, dtype=cp.float64)
        self.r = self.state[0::2]
        self.thr32 = cp.zeros(n, dtype=cp.float32)  # the records' thresholds, for the dense clear
        self.adaptive = None  # which thresholds they are
        self.pi0 = cp.zeros(n, dtype=cp.float64)
        # received a push (a byte per vertex): the touched list is rebuilt from it; whole 16-byte words,
        # the bytes past n never written
        self.seen_words = cp.zeros(-(-n // 16) * 16, dtype=cp.uint8)
        self.seen = self.seen_words[:n]
        self.touched = cp.empty(n, dtype=cp.int32)
        self.front = cp.empty((2, n), dtype=cp.int32)
        self.big = cp.empty(n, dtype=cp.int32)
        self.bigval = cp.empty(n, dtype=cp.float64)  # also per-frontier values (push), estimates (refine)
        self.off = cp.empty(n + 1, dtype=cp.int64)
        self.shift = cp.empty(n, dtype=cp.int64)
        self.dangling = cp.zeros(1, dtype=cp.float64)
        self.nh = int(a["high"].size)
        self.ids = cp.empty(self.nh + n, dtype=cp.int32)
        self.ids[: self.nh] = a["high"]
        self.est = cp.empty(self.nh + n, dtype=cp.float64)
        self.est_h = cp.zeros(self.nh + 1, dtype=cp.float64)
        self.counts = cp.zeros(8, dtype=cp.int32)
        self.stats = cp.zeros(3, dtype=cp.uint64)
        self.round_top = None  # the buffers of ``round_top`` for the last k
        self.round_tops = {}  # and for every k so far (a captured round holds their addresses)
        self.sm_blocks = sm_count()
        self.blocks = persistent_blocks()  # fewer when several queries run at once
        self.in_flight = 1  # queries running at once on the GPU (``_topk_batch``)
        self.replay = False  # rounds as CUDA graphs where they may be (set by ``_topk_batch`` for queries)
        self.bsum = cp.empty(self.blocks, dtype=cp.int64)
        self.seen_tiles = seen_tiles_buffer(self.seen_words)
        self.seg_entries = cp.empty(segment_count(self.sm_blocks), dtype=cp.int64)  # Alg. 4's segments
        self.seg_back = cp.empty(self.seg_entries.size, dtype=cp.float64)
        self.seg_owners = cp.empty(self.seg_entries.size, dtype=cp.int32)  # lists with entries per segment
        self.bound_by_vertex, self.bound_smem = self.nh <= BY_VERTEX_H, bound_smem_plan(self.nh)
        self.launches = 0
        self.args = {}  # round kernels' arguments, built once per workspace (``launch_args``)
        # the round's r_max, tau and source (QP_*), written on the host and copied before the kernels
        self.qp = cp.zeros(4, dtype=cp.float64)
        self.qp_host = np.frombuffer(cp.cuda.alloc_pinned_memory(32), dtype=np.float64, count=4)
        self.qp_copy = (self.qp.data.ptr, self.qp_host.ctypes.data, 32)
        self.qp_sent = False  # qp holds qp_host's values (or their copy is queued)
        self.fresh = False  # started, its start kernels not yet queued
        self.deferred = None  # the push, queued with the rest of the round (``_topk_gpu_graph``)
        self.graphs = {}  # the rounds captured as CUDA graphs, by configuration
        self.capture_stream = None  # where they are captured when the query runs on the legacy stream
        self.record = np.zeros(6)
        self.done = cp.cuda.Event(block=False, disable_timing=True)  # recorded after a round's last copy
        self.round = None  # what ``estimate_finish`` reads: (ids, offset, k)

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
        thr = self.thresholds(adaptive)
        low = thr.astype(cp.float32)
        self.thr32[:] = cp.where(low.astype(cp.float64) > thr, cp.nextafter(low, cp.float32(0)), low)
        self.state.view(cp.float32)[2::4] = self.thr32
        self.adaptive = adaptive

    def ntouched(self) -> int:
        return int(self.counts[3])

    def launch_args(self, key, make):
        """What ``make()`` returns (a round kernel's arguments, or parts of them), kept per workspace and
        ``key``: a round launches without slicing, viewing or converting its buffers again (a CuPy slice
        costs a sizeable share of a launch's host time)."""
        got = self.args.get(key)
        if got is None:
            got = self.args[key] = make()
        return got

    def _start_args(self):
        clear = (
            self.touched,
            self.counts[3:],
            np.int64(self.r.size),
            self.state,
            self.thr32,
            self.pi0,
            self.seen,
        )
        return clear, (self.state, self.seen, self.touched, self.counts, self.stats)

    def set_param(self, i: int, value) -> None:
        """Parameter ``i`` (QP_RMAX, QP_TAU, QP_S) of the round, copied to ``qp`` on the current stream
        before the next kernel that reads it: one copy for the values set since the last (inside a
        captured round the copy runs with the graph, from what the host wrote last)."""
        if self.qp_host[i] != value:
            self.qp_host[i] = value
            self.qp_sent = False

    def send_params(self) -> None:
        if not self.qp_sent:
            cp = import_cupy()
            stream = cp.cuda.get_current_stream().ptr
            cp.cuda.runtime.memcpyAsync(*self.qp_copy, cp.cuda.runtime.memcpyHostToDevice, stream)
            self.qp_sent = True

    @property
    def as_graphs(self) -> bool:
        """The rounds of ``topk_ppr``'s queries (``replay``; one at a time, or several in flight, each on its
        own stream) on a graph below ``_topk_gpu_graph.MAX_VERTICES`` run as CUDA graphs; called one by
        one, as the tests do, these primitives launch their kernels at once."""
        return self.replay and graph_rounds.GRAPHS and self.r.size < graph_rounds.MAX_VERTICES

    def start(self, s: int) -> None:
        self.s, self.launches, self.fresh = s, 0, True
        if not self.as_graphs:  # else queued with the first round
            self.launch_start()

    def launch_start(self) -> None:
        self.fresh = False
        self.set_param(QP_S, self.s)
        self.send_params()
        clear, tail = self.launch_args("start", self._start_args)
        _kernel("gj_query_clear")((self.sm_blocks * 4,), (THREADS,), clear)
        _kernel("gj_query_start")((1,), (1,), (self.qp, *tail))

    def push(self, rmax: float, *, adaptive: bool, tiling: bool, persistent: bool) -> None:
        """ParallelAFP from the regenerated frontier until it is empty (where rounds run as graphs,
        queued with the rest of the round by ``estimate_launch``)."""
        self.load_thresholds(adaptive)
        if persistent and self.as_graphs:
            self.deferred = float(rmax)
            return
        if self.fresh:
            self.launch_start()
        if persistent:
            push_persistent(self, float(rmax))
        else:
            push_frontiers(self, np.float64(rmax), adaptive, tiling)
        list_seen(self)

    def estimate_launch(self, tau: float, k: int, *, high_irw: bool, tiling: bool) -> None:
        """Queue the rest of the round on the current stream: candidates, Alg. 4, Alg. 6 and the top k,
        copied to the host; ``ready()`` tells when it has arrived."""
        nh = self.nh
        offset = nh if high_irw else 0  # with H: the list is H, then the candidates outside H
        ids = self.launch_args(("ids", offset), lambda: self.ids[nh - offset :])
        if self.deferred is not None:
            rmax, self.deferred = self.deferred, None
            graph_rounds.queue_round(self, rmax, tau, k, high_irw, tiling, ids, offset)
        else:
            self.estimate_kernels(tau, k, high_irw, tiling, ids, offset)
        self.done.record()
        self.round = (ids, offset, k)

    def round_kernels(self, rmax, tau, k, high_irw, tiling, ids, offset) -> None:
        """The whole round: the start kernels when it is the query's first, the push and the rest."""
        if self.fresh:
            self.launch_start()
        push_persistent(self, rmax)
        list_seen(self)
        self.estimate_kernels(tau, k, high_irw, tiling, ids, offset)

    def estimate_kernels(self, tau, k, high_irw, tiling, ids, offset) -> None:
        select_and_bound_gpu(self, tau, high_irw)
        compute_ppr_gpu(self, ids, offset, TSIZE if tiling else 1)
        launch_round_top(self, ids, offset, k)

    def ready(self) -> bool:
        return self.done.done

    def estimate_finish(self):
        """The round's top k (host arrays: internal ids, unnormalised estimates), the number of
        candidates and the returned mass sum r(v) b_v (waits for ``estimate_launch``'s work)."""
        self.done.synchronize()
        verts, est = read_round_top(self, *self.round)
        return verts, est, int(self.record[0]), float(self.record[2])

    # the refinement of the last round's answer at the k-th value (``_topk_refine``)
    refine_launch, refine_finish = refine_launch_gpu, refine_read_gpu

    def pushes(self) -> int:
        return int(self.record[3])

    def closed_reach(self, limit: int):
        """The touched vertices when at most ``limit`` and each was pushed (see ``_topk_exact``)."""
        nt = int(self.record[1])  # the round's touched count
        if nt > limit:
            return None
        t = self.touched[:nt]
        pushed = self.pi0[t] > 0
        return t.get() if bool(pushed.all()) else None

    def fallback(self, walks_per_mass: float, key: int):
        return fallback_gpu(self, walks_per_mass, key)
