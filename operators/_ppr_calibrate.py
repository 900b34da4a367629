"""Micro-benchmarks that weigh the hybrid PPR cost model on the GPU at hand (run once per GPU model).

Three kernels over an R-MAT graph (scale 20, seed 0), a warp per vertex as in the solver: atomic adds
along every out-edge (push), gathers along every in-edge with a warp reduction (pull), and one update
of every vertex in order (pull's sweep). Each time is divided by its number of warp steps
(``sum ceil(d / 32)``, or ``n / 32``); the weights are those per-step costs relative to the last.
"""

from __future__ import annotations

import numpy as np

from graphs._device import event_seconds, get_kernel, import_cupy

CALIBRATE_KERNEL = r"""
extern "C" __global__ void gj_cal_atomic(const long long* indptr, const int* indices, int n, double* x) {
    const int lane = threadIdx.x & 31;
    for (long long u = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; u < n;
         u += (long long)gridDim.x * blockDim.x / 32)
        for (long long e = indptr[u] + lane; e < indptr[u + 1]; e += 32) atomicAdd(&x[indices[e]], 1.0);
}
extern "C" __global__ void gj_cal_read(const long long* tptr, const int* tind, int n, const double* x,
                                      double* y) {
    const int lane = threadIdx.x & 31;
    for (long long u = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; u < n;
         u += (long long)gridDim.x * blockDim.x / 32) {
        double acc = 0.0;
        for (long long e = tptr[u] + lane; e < tptr[u + 1]; e += 32) acc += x[tind[e]];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) y[u] = acc;
    }
}
extern "C" __global__ void gj_cal_sweep(int n, const double* x, double* y) {
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < n;
         u += (long long)gridDim.x * blockDim.x)
        y[u] = 0.5 * y[u] + x[u];
}
"""


def measure_weights(model) -> tuple[float, float, float]:
    """(l1, l2, l3): per-warp-step costs of atomic writes, random reads and the sweep, l3 = 1."""
    import graphs

    cp = import_cupy()
    g = graphs.rmat(20, seed=0, device="gpu")
    t = g.transpose()
    n = np.int32(g.n)
    x, y = cp.ones(g.n, np.float64), cp.zeros(g.n, np.float64)
    grid, block = (model.blocks,), (model.lanes * model.warps,)
    kernel = lambda name: get_kernel(CALIBRATE_KERNEL, name)  # noqa: E731
    best = lambda launch: min(event_seconds(launch, repeats=5, warmup=1))  # noqa: E731  (warm-up compiles)
    t_atomic = best(lambda: kernel("gj_cal_atomic")(grid, block, (g.indptr, g.indices, n, y)))
    t_read = best(lambda: kernel("gj_cal_read")(grid, block, (t.indptr, t.indices, n, x, y)))
    t_sweep = best(lambda: kernel("gj_cal_sweep")(grid, block, (n, x, y)))
    steps = lambda indptr: float((-(-cp.diff(indptr) // 32)).sum())  # noqa: E731
    per = (t_atomic / steps(g.indptr), t_read / steps(t.indptr), t_sweep / (g.n / 32))
    return per[0] / per[2], per[1] / per[2], 1.0
