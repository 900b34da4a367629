"""GPU (CuPy RawKernel) workspace and round of the top-k PPR query (Sec. 4 of the kPAR paper).

A round is a chain of kernels on the query's stream with the counts kept on the device: the push
(``_topk_gpu_push``), the candidates pi0(s, v) >= tau appended to a list that starts with H, the
bound reduction over H (Alg. 4), the estimates of the whole list (Alg. 6) and the list's top k
(``_topk_gpu_select``), which the host reads with the round's record (candidates, returned mass) in
one copy. The candidates are not sorted by reserve as the paper's line says: every estimate is
computed at once, so their order changes nothing.
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy

from ._topk_gpu_estimate import bound_reduction_gpu, compute_ppr_gpu, fallback_gpu
from ._topk_gpu_frontier import BIG_DEGREE, TSIZE, push_frontiers
from ._topk_gpu_push import PUSH_DEVICE, persistent_blocks, push_persistent
from ._topk_gpu_select import round_top

THREADS = 256

QUERY_CUDA = r"""
extern "C" __global__ void gj_query_clear(const int* touched, const int* ntouched, double* r, double* pi0,
        int* mark) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < *ntouched; i += gridDim.x * blockDim.x) {
        int u = touched[i];
        r[u] = 0.0; pi0[u] = 0.0; mark[u] = 0;
    }
}

extern "C" __global__ void gj_query_start(int s, double* r, int* mark, int* touched, int* counts,
        unsigned long long* stats) {
    r[s] = 1.0; mark[s] = 2; touched[0] = s;
    for (int i = 0; i < 8; ++i) counts[i] = 0;
    counts[3] = 1;
    stats[0] = stats[1] = stats[2] = 0;
}

extern "C" __global__ void gj_select_candidates(const int* touched, const int* ntouched, const double* pi0,
        double tau, const int* h_index, int exclude_h, int* cand, int* ncand) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < *ntouched; i += gridDim.x * blockDim.x) {
        int t = touched[i];
        if (pi0[t] >= tau && !(exclude_h && h_index[t] >= 0)) gj_append(cand, ncand, t);
    }
}
"""
QUERY_KERNELS = PUSH_DEVICE + QUERY_CUDA


def _kernel(name):
    return get_kernel(QUERY_KERNELS, name)


class GPUQuery:
    """The workspace and round of Algorithm 3 on the GPU (one per thread, or stream, and index).

    ``counts``: [0:3] frontier sizes (a ring in ``push_frontiers``; [0:2] in the persistent push),
    [3] touched, [4:6] big-vertex lists, [6] candidates, [7] long H lists (listed in ``big``).
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
        deg = cp.diff(g.indptr)
        deg1 = cp.maximum(deg, 1).astype(cp.float64)
        self.thr = {True: deg1 * a["beta"], False: deg1}
        self.has_big = bool(n) and int(deg.max()) > BIG_DEGREE
        self.inv_omega = 1.0 / a["omega"].astype(cp.float64)
        self.r = cp.zeros(n, dtype=cp.float64)
        self.pi0 = cp.zeros(n, dtype=cp.float64)
        self.mark = cp.zeros(n, dtype=cp.int32)
        self.touched = cp.empty(n, dtype=cp.int32)
        self.front = cp.empty((2, n), dtype=cp.int32)
        self.big = cp.empty(n, dtype=cp.int32)
        self.bigval = cp.empty(n, dtype=cp.float64)  # also the persistent push's per-frontier values
        self.off = cp.empty(n, dtype=cp.int64)
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
        self.sm_blocks = int(cp.cuda.Device().attributes["MultiProcessorCount"])
        self.blocks = persistent_blocks()  # fewer when several queries run at once
        self.bsum = cp.empty(self.blocks, dtype=cp.int64)
        self.launches = 0
        self.record = np.zeros(6)

    def ntouched(self) -> int:
        return int(self.counts[3])

    def start(self, s: int) -> None:
        self.s, self.launches = s, 0
        _kernel("gj_query_clear")(
            (self.sm_blocks * 4,), (THREADS,), (self.touched, self.counts[3:], self.r, self.pi0, self.mark)
        )
        _kernel("gj_query_start")(
            (1,), (1,), (np.int32(s), self.r, self.mark, self.touched, self.counts, self.stats)
        )

    def push(self, rmax: float, *, adaptive: bool, tiling: bool, persistent: bool) -> None:
        """ParallelAFP from the regenerated frontier until it is empty."""
        if persistent:
            push_persistent(self, np.float64(rmax), adaptive)
        else:
            push_frontiers(self, np.float64(rmax), adaptive, tiling)

    def estimate(self, tau: float, k: int, *, high_irw: bool, tiling: bool):
        """The round's top k (host arrays: internal ids, unnormalised estimates), the number of
        candidates and the returned mass sum r(v) b_v."""
        a, nh = self.index.arrays, self.nh
        _kernel("gj_select_candidates")(
            (self.sm_blocks * 4,), (THREADS,),
            (self.touched, self.counts[3:], self.pi0, np.float64(tau), a["h_index"], np.int32(high_irw),
             self.ids[nh:], self.counts[6:]),
        )  # fmt: skip
        bound_reduction_gpu(self)
        offset = nh if high_irw else 0  # with H: the list is H, then the candidates outside H
        ids = self.ids[nh - offset :]
        compute_ppr_gpu(self, ids, offset, TSIZE if tiling else 1)
        verts, est = round_top(self, ids, offset, k)
        return verts, est, int(self.record[0]), float(self.record[2])

    def pushes(self) -> int:
        return int(self.record[3])

    def fallback(self, walks_per_mass: float, key: int):
        return fallback_gpu(self, walks_per_mass, key)
