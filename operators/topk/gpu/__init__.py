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
from operators.topk.gpu.bound import Candidates
from operators.topk.gpu.estimate import compute_ppr_gpu, fallback_gpu
from operators.topk.gpu.frontier import TSIZE, push_frontiers
from operators.topk.gpu.graph import GraphReplay
from operators.topk.gpu.push import (
    QP_S,
    VERTEX_CUDA,
    VERTEX_DEFINES,
    PushState,
    RoundParams,
    persistent_blocks,
)
from operators.topk.gpu.refine import Refinement
from operators.topk.gpu.seen import list_seen
from operators.topk.gpu.select import RoundTops
from operators.topk.refine import REFINE_Z

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


def _start_args(push: PushState):
    """The arguments of ``gj_query_clear`` and those of ``gj_query_start`` after the parameter block."""
    clear = (
        push.touched,
        push.counts[3:],
        np.int64(push.r.size),
        push.state,
        push.thr32,
        push.pi0,
        push.seen,
    )
    return clear, (push.state, push.seen, push.touched, push.counts, push.stats)


class GPUQuery:
    """The workspace and rounds of Algorithm 3 on the GPU (one per calling thread, or stream, and index):
    an engine built from parts that own their buffers, closed by ``close()`` (or as a context manager).

    Its parts: ``params``, the round's parameter block (``_topk_gpu_push.RoundParams``); ``push_state``,
    the vertex state and the push's buffers (``_topk_gpu_push.PushState``); ``candidates``, the round's
    list, its estimates and Alg. 4's buffers (``_topk_gpu_bound.Candidates``); ``tops``, the round's top
    k and record (``_topk_gpu_select.RoundTops``); ``refinement``, the refinement's buffers
    (``_topk_gpu_refine.Refinement``); ``graph_replay``, the rounds captured as CUDA graphs and their
    capture stream (``_topk_gpu_graph.GraphReplay``); and ``done``, the event recorded after a round's
    or refinement's last copy. ``blocks`` (the persistent push's grid, fewer when several queries run at
    once), ``in_flight`` (queries running at once on the GPU) and ``replay`` (rounds as CUDA graphs where
    they may be) are set by ``_topk_batch``; ``s``, ``fresh``, ``deferred``, ``round`` and ``launches``
    follow the query in progress.
    """

    def __init__(self, index):
        cp = import_cupy()
        if index.graph.indices.dtype != np.int32:
            raise NotImplementedError("GPU top-k PPR queries support graphs with fewer than 2**31 vertices")
        sm_blocks = sm_count()
        self.index = index
        self.blocks = persistent_blocks()  # fewer when several queries run at once
        self.in_flight = 1  # queries running at once on the GPU (``_topk_batch``)
        self.replay = False  # rounds as CUDA graphs where they may be (set by ``_topk_batch`` for queries)
        self.params = RoundParams()
        self.push_state = PushState(index, self.params, sm_blocks, self.blocks)
        self.candidates = Candidates(index, self.push_state, self.params, sm_blocks)
        self.tops = RoundTops(index, self.candidates, self.push_state)
        self.refinement = Refinement(index, self.candidates, sm_blocks)
        self.graph_replay = GraphReplay()
        self.done = cp.cuda.Event(block=False, disable_timing=True)  # recorded after a round's last copy
        self.s = None  # the source of the query in progress
        self.launches = 0  # the push's launches of the query (the paper's schedule)
        self.fresh = False  # started, its start kernels not yet queued
        self.deferred = None  # the push, queued with the rest of the round (``_topk_gpu_graph``)
        self.round = None  # what ``estimate_finish`` reads: (ids, offset, k)
        self.closed = False

    def __enter__(self) -> GPUQuery:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release the workspace: its buffers, captured graphs, capture stream and event, once the device
        has finished its queued work. A query on it afterwards raises ``RuntimeError``."""
        if self.closed:
            return
        import_cupy().cuda.Device().synchronize()  # no kernel may still use them when their memory is reused
        for part in (
            self.graph_replay,
            self.refinement,
            self.tops,
            self.candidates,
            self.push_state,
            self.params,
        ):
            part.close()
        self.done = self.round = self.deferred = None
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(
                "this GPU top-k query workspace is closed (its buffers were released by close() or "
                "index.forget_workspaces()); take a new one"
            )

    @property
    def as_graphs(self) -> bool:
        """The rounds of ``topk_ppr``'s queries (``replay``; one at a time, or several in flight, each on its
        own stream) on a graph below ``_topk_gpu_graph.MAX_VERTICES`` run as CUDA graphs; called one by
        one, as the tests do, these primitives launch their kernels at once."""
        return self.replay and graph_rounds.GRAPHS and self.index.graph.n < graph_rounds.MAX_VERTICES

    def start(self, s: int) -> None:
        self._check_open()
        self.s, self.launches, self.fresh = s, 0, True
        if not self.as_graphs:  # else queued with the first round
            self.launch_start()

    def launch_start(self) -> None:
        p = self.push_state
        self.fresh = False
        self.params.set(QP_S, self.s)
        self.params.send()
        clear, tail = p.args.get("start", lambda: _start_args(p))
        _kernel("gj_query_clear")((p.sm_blocks * 4,), (THREADS,), clear)
        _kernel("gj_query_start")((1,), (1,), (self.params.qp, *tail))

    def push(self, rmax: float, *, adaptive: bool, tiling: bool, persistent: bool) -> None:
        """ParallelAFP from the regenerated frontier until it is empty (where rounds run as graphs,
        queued with the rest of the round by ``estimate_launch``)."""
        self._check_open()
        self.push_state.load_thresholds(adaptive)
        if persistent and self.as_graphs:
            self.deferred = float(rmax)
            return
        if self.fresh:
            self.launch_start()
        if persistent:
            self.push_state.push_persistent(float(rmax), self.blocks)
        else:
            self.launches += push_frontiers(self.push_state, self.s, np.float64(rmax), adaptive, tiling)
        list_seen(self.push_state, self.blocks)

    def estimate_launch(self, tau: float, k: int, *, high_irw: bool, tiling: bool) -> None:
        """Queue the rest of the round on the current stream: candidates, Alg. 4, Alg. 6 and the top k,
        copied to the host; ``ready()`` tells when it has arrived."""
        self._check_open()
        c = self.candidates
        nh = c.nh
        offset = nh if high_irw else 0  # with H: the list is H, then the candidates outside H
        ids = c.args.get(("ids", offset), lambda: c.ids[nh - offset :])
        if self.deferred is not None:
            rmax, self.deferred = self.deferred, None
            self._queue_round(rmax, tau, k, high_irw, tiling, ids, offset)
        else:
            self.estimate_kernels(tau, k, high_irw, tiling, ids, offset)
        self.done.record()
        self.round = (ids, offset, k)

    def _queue_round(self, rmax, tau, k, high_irw, tiling, ids, offset) -> None:
        """Queue one round of the query on the current stream, as a graph where one was captured."""
        c = self.candidates
        key = (
            self.fresh,
            k,
            high_irw,
            tiling,
            self.blocks,
            self.in_flight,
            c.bound_smem,
            c.bound_by_vertex,
            offset,
        )
        self.params.set_round(rmax, tau, self.s)  # a round's first launch sends them: one copy a round
        args = (rmax, tau, k, high_irw, tiling, ids, offset)
        if self.graph_replay.replay(key, lambda: self.round_kernels(*args), self._rewind):
            # the graph sent the parameters (``sent`` is the host's view)
            self.fresh = self.params.sent = False
            self.tops.use(k)  # where the graph's copy lands, read by ``estimate_finish``

    def _rewind(self):
        """What a capture that fails puts back (``GraphReplay.replay``): the start kernels and the
        parameters' copy were captured, not run."""
        fresh = self.fresh

        def undo() -> None:
            self.fresh, self.params.sent = fresh, False

        return undo

    def round_kernels(self, rmax, tau, k, high_irw, tiling, ids, offset) -> None:
        """The whole round: the start kernels when it is the query's first, the push and the rest."""
        if self.fresh:
            self.launch_start()
        self.push_state.push_persistent(rmax, self.blocks)
        list_seen(self.push_state, self.blocks)
        self.estimate_kernels(tau, k, high_irw, tiling, ids, offset)

    def estimate_kernels(self, tau, k, high_irw, tiling, ids, offset) -> None:
        self.candidates.select_and_bound(tau, high_irw, self.in_flight)
        compute_ppr_gpu(self.candidates, ids, offset, TSIZE if tiling else 1)
        self.tops.launch(ids, offset, k)

    def ready(self) -> bool:
        return self.done.done

    def estimate_finish(self):
        """The round's top k (host arrays: internal ids, unnormalised estimates), the number of
        candidates and the returned mass sum r(v) b_v (waits for ``estimate_launch``'s work)."""
        self.done.synchronize()
        verts, est = self.tops.read(*self.round)
        record = self.tops.record
        return verts, est, int(record[0]), float(record[2])

    def refine_launch(self, verts, raw, k, *, tau, rho, high_irw, edges, z=REFINE_Z) -> None:
        """Queue the refinement of the last round's answer at the k-th value (``_topk_refine``) on the
        current stream: in ``topk_ppr``'s queries (``replay``) as a CUDA graph once captured."""
        self._check_open()
        ids, offset, _ = self.round
        listed = offset + self.tops.record[0]  # H and the candidates (the round's record holds their count)
        graphs = self.graph_replay if self.replay and graph_rounds.GRAPHS else None
        self.refinement.launch(
            verts,
            raw,
            k,
            ids,
            offset,
            listed,
            self.s,
            tau=tau,
            rho=rho,
            high_irw=high_irw,
            edges=edges,
            z=z,
            graphs=graphs,
            rewind=self._rewind,
        )
        self.done.record()

    def refine_finish(self):
        """(vertices, raw estimates, band size) once ``refine_launch``'s copies have arrived."""
        self.done.synchronize()
        return self.refinement.read()

    def pushes(self) -> int:
        return int(self.tops.record[3])

    def closed_reach(self, limit: int):
        """The touched vertices when at most ``limit`` and each was pushed (see ``_topk_exact``)."""
        nt = int(self.tops.record[1])  # the round's touched count
        if nt > limit:
            return None
        t = self.push_state.touched[:nt]
        pushed = self.push_state.pi0[t] > 0
        return t.get() if bool(pushed.all()) else None

    def fallback(self, walks_per_mass: float, key: int):
        self._check_open()
        return fallback_gpu(self.push_state, walks_per_mass, key)
