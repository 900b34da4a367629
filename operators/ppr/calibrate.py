"""Micro-benchmarks that weigh the hybrid PPR cost model on the GPU at hand (run once per GPU model).

Three kernels over an R-MAT graph (scale ``SCALE``, seed 0), a warp per vertex as in the solver:
atomic adds along every out-edge that, like the push's, read the old value back to list each vertex
the first time it receives (push); gathers along every in-edge with a warp reduction, the warp taking
32 vertices at a time and skipping those without in-edges, as the solver's pull does (pull); and one
update of every vertex in order (pull's sweep). Each time is divided by its number of warp steps
(``sum ceil(d / 32)``, or ``n / 32``); the weights are those per-step costs relative to the last.
The sweep is too short to time alone between CUDA events (the events and the launch would dominate,
and vary from run to run), so it is timed as the extra time of 20 more sweeps in a row, and the
weights are the median of ``ROUNDS`` rounds.
An atomic whose old value is used costs about twice one whose value is dropped, so the push kernel
reads the old value back as the solver does: otherwise push would look cheaper than it is.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.launch import event_seconds
from operators._gpu.registry import Kernel

CALIBRATE_KERNEL = r"""
extern "C" __global__ void gj_cal_atomic(const long long* indptr, const int* indices, int n, double* x,
        int* touched, int* count) {
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    for (long long u = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; u < n;
         u += (long long)gridDim.x * blockDim.x / 32) {
        const long long lo = indptr[u], hi = indptr[u + 1];
        for (long long e0 = lo; e0 < hi; e0 += 32) {  // warp-uniform
            const long long e = e0 + lane;
            const int v = indices[e < hi ? e : lo];
            const bool first = e < hi && atomicAdd(&x[v], 1.0) == 0.0;
            const unsigned mask = __ballot_sync(full, first);
            int base = 0;
            if (mask && lane == __ffs(mask) - 1) base = atomicAdd(count, __popc(mask));
            base = __shfl_sync(full, base, __ffs(mask ? mask : 1u) - 1);
            if (first) touched[base + __popc(mask & ((1u << lane) - 1))] = v;
        }
    }
}
extern "C" __global__ void gj_cal_read(const long long* tptr, const int* tind, int n, const double* x,
                                      double* y) {
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long u0 = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; u0 < n; u0 += 32 * warps) {
        const long long u = u0 + lane * warps;  // 32 vertices at a time, one per lane, as the solver's pull
        const long long lo = u < n ? tptr[u] : 0, hi = u < n ? tptr[u + 1] : 0;
        double acc = 0.0;
        for (unsigned todo = __ballot_sync(full, hi > lo); todo; todo &= todo - 1) {
            const int j = __ffs(todo) - 1;
            const long long a = __shfl_sync(full, lo, j), z = __shfl_sync(full, hi, j);
            double s = 0.0;
            for (long long e = a + lane; e < z; e += 32) s += x[tind[e]];
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
            if (lane == j) acc = s;
        }
        if (u < n) y[u] = acc;
    }
}
extern "C" __global__ void gj_cal_sweep(int n, const double* x, double* y) {
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < n;
         u += (long long)gridDim.x * blockDim.x)
        y[u] = 0.5 * y[u] + x[u];
}
"""

SCALE = 20
ROUNDS = 5  # the weights are the median of this many measurements

CALIBRATE = Kernel(CALIBRATE_KERNEL, ("gj_cal_atomic", "gj_cal_read", "gj_cal_sweep"), label="ppr-calibrate")


def measure_weights(model, scale: int = SCALE) -> tuple[float, float, float]:
    """(l1, l2, l3): per-warp-step costs of atomic writes, random reads and the sweep, l3 = 1."""
    import graphs

    cp = import_cupy()
    g = graphs.rmat(scale, seed=0, device="gpu")
    t = g.transpose()
    n = np.int32(g.n)
    x, y = cp.ones(g.n, np.float64), cp.zeros(g.n, np.float64)
    touched, count = cp.empty(g.n, np.int32), cp.zeros(1, np.int32)
    grid, block = (model.blocks,), (model.lanes * model.warps,)
    kernel = CALIBRATE.get
    best = lambda launch: min(event_seconds(launch, repeats=5, warmup=1))  # noqa: E731  (warm-up compiles)

    def clear():  # every vertex starts at zero, as the residues that a push iteration receives
        y.fill(0)
        count.fill(0)

    def push():
        clear()
        kernel("gj_cal_atomic")(grid, block, (g.indptr, g.indices, n, y, touched, count))

    def sweeps(k: int):
        for _ in range(k):
            kernel("gj_cal_sweep")(grid, block, (n, x, y))

    steps = lambda indptr: float((-(-cp.diff(indptr) // 32)).sum())  # noqa: E731
    weights = []
    for _ in range(ROUNDS):
        t_atomic = best(push) - best(clear)
        t_read = best(lambda: kernel("gj_cal_read")(grid, block, (t.indptr, t.indices, n, x, y)))
        t_sweep = (best(lambda: sweeps(21)) - best(lambda: sweeps(1))) / 20
        per = (t_atomic / steps(g.indptr), t_read / steps(t.indptr), t_sweep / (g.n / 32))
        weights.append((per[0] / per[2], per[1] / per[2]))
    l1, l2 = np.median(np.array(weights), axis=0)
    return float(l1), float(l2), 1.0
