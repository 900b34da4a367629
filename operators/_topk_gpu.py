"""GPU (CuPy RawKernel) workspace and round of the top-k PPR query (Sec. 4 of the kPAR paper).

A round is a chain of kernels on the query's stream with the counts kept on the device: the push
(``_topk_gpu_push``), the candidates pi0(s, v) >= tau appended to a list that starts with H, the
bound reduction over H (Alg. 4) and the estimates of the whole list (Alg. 6). The host then reads
one small record (candidates, returned mass) and the list's estimates, and picks the top k itself
while the list is short (``HOST_TOP``). The candidates are not sorted by reserve as the paper's
line says: every estimate is computed at once, so their order changes nothing.
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy

from ._topk_cpu import select_top
from ._topk_gpu_estimate import bound_reduction_gpu, compute_ppr_gpu, fallback_gpu
from ._topk_gpu_frontier import BIG_DEGREE, TSIZE, push_frontiers
from ._topk_gpu_push import PUSH_DEVICE, persistent_blocks, push_persistent

THREADS = 256
HOST_TOP = 1 << 13  # lists up to this long go to the host for the top k; longer ones are sorted here

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

// the round's record for the host: candidates, touched, returned mass, pushes, frontiers, edges pushed
// (persistent push); the counts of candidates and of long H lists are cleared for the next round
extern "C" __global__ void gj_round_info(int* counts, const double* est_h, int nh,
        const unsigned long long* stats, double* info) {
    info[0] = counts[6]; info[1] = counts[3]; info[2] = est_h[nh]; info[3] = stats[0]; info[4] = stats[1];
    info[5] = stats[2]; counts[6] = counts[7] = 0;
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
        self.info = cp.zeros(6, dtype=cp.float64)
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
        cp = import_cupy()
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
        _kernel("gj_round_info")((1,), (1,), (self.counts, self.est_h, np.int32(nh), self.stats, self.info))
        self.record = self.info.get()
        ncand = int(self.record[0])
        size = offset + ncand
        if size <= HOST_TOP:
            est, verts = self.est[:size].get(), ids[:size].get()
        else:  # sorted here; the ties at the k-th place resolved on the host with the rest
            best = cp.argsort(-self.est[:size])[: 2 * k + 1024]
            est, verts = self.est[best].get(), ids[best].get()
        best = select_top(verts, est, k)
        return verts[best], est[best], ncand, float(self.record[2])

    def pushes(self) -> int:
        return int(self.record[3])

    def fallback(self, walks_per_mass: float, key: int):
        return fallback_gpu(self, walks_per_mass, key)
