"""Random walks of the kPAR index: the budget scheme's walk multipliers (Sec. 3.3.2, ``budget_levels``) and
the walks themselves (their inversion into the IRW layout: ``_irw_invert``).

Walk ``w`` (numbered through all start vertices, ``wptr`` gives each start's first walk) draws
``rand_unit(mix64(key + w * GOLDEN), c)`` for its c-th number, so CPU and GPU produce the same walks
for the same seed. At each step the walk stops with probability ``1 - alpha``; otherwise it moves to
a uniform out-neighbour, or, at a vertex without out-edges, it "returns to the source" (end -1).
With ``first`` set, a walk never stops before its first step (the index's walks: the query then adds
the (1 - alpha) share of a start's residue that immediate stops would estimate, exactly; the draws
are the same, the first stop draw is unused). ``walk_keys`` writes each walk as the sort key of its
(end, start) pair, which is all the inversion needs.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from graphs._device import array_module
from graphs._mix import MIX_CUDA, MIX_DEFINES, mix64, rand_unit
from operators._gpu.launch import launch_config
from operators._gpu.registry import Kernel
from operators._progress import report

_U_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
PROGRESS_STEPS = 32  # runs of the CPU's walks when progress is reported (one run otherwise)


@nb.njit(inline="always", cache=True)
def _walk_cpu(indptr, indices, v, kw, stop, first):
    cur = np.int64(v)
    step = np.uint64(0)
    while True:
        if (step > 0 or not first) and rand_unit(kw, np.uint64(2) * step) < stop:
            return cur
        d = indptr[cur + 1] - indptr[cur]
        if d == 0:
            return np.int64(-1)
        j = np.int64(rand_unit(kw, np.uint64(2) * step + np.uint64(1)) * d)
        cur = np.int64(indices[indptr[cur] + min(j, d - 1)])
        step += np.uint64(1)


@nb.njit(parallel=True, cache=True)
def _walks_cpu(indptr, indices, wptr, lo, hi, key, stop, first, end, keys):
    n = wptr.size - 1
    for v in nb.prange(lo, hi):
        for w in range(wptr[v], wptr[v + 1]):
            kw = mix64(key + np.uint64(w) * _U_GOLDEN)
            e = _walk_cpu(indptr, indices, v, kw, stop, first)
            end[w] = e * n + v if keys and e >= 0 else (v - n if keys else e)


WALK_CUDA = r"""
template <typename I>
__device__ __forceinline__ long long gj_walk(const long long* indptr, const I* indices, long long v,
                                             unsigned long long kw, double stop, int first) {
    long long cur = v;
    for (unsigned long long step = 0;; ++step) {
        if ((step > 0 || !first) && gj_rand_unit(kw, 2 * step) < stop) return cur;
        long long d = indptr[cur + 1] - indptr[cur];
        if (d == 0) return -1;
        long long j = (long long)(gj_rand_unit(kw, 2 * step + 1) * (double)d);
        cur = (long long)indices[indptr[cur] + (j < d - 1 ? j : d - 1)];
    }
}
"""

WALKS_KERNEL = (
    MIX_CUDA
    + WALK_CUDA
    + r"""
// OUT = I: each walk's end vertex (-1: returned to the source); OUT = long long with KEYS: the key of
// walk_keys instead (end * n + start, or start - n for a returned walk)
template <typename I, typename OUT, bool KEYS>
__device__ void gj_walks(const long long* indptr, const I* indices, const long long* wptr, long long n,
                         unsigned long long key, double stop, int first, OUT* out) {
    long long total = wptr[n], stride = (long long)gridDim.x * blockDim.x;
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < total; w += stride) {
        long long lo = 0, hi = n;  // the start vertex: last v with wptr[v] <= w
        while (hi - lo > 1) {
            long long mid = (lo + hi) >> 1;
            if (wptr[mid] <= w) lo = mid; else hi = mid;
        }
        unsigned long long kw = gj_mix64(key + (unsigned long long)w * GJ_GOLDEN);
        const long long e = gj_walk<I>(indptr, indices, lo, kw, stop, first);
        out[w] = KEYS ? (OUT)(e >= 0 ? e * n + lo : lo - n) : (OUT)e;
    }
}
extern "C" __global__ void gj_irw_walks_i32(const long long* indptr, const int* indices,
        const long long* wptr, long long n, unsigned long long key, double stop, int first, int* end) {
    gj_walks<int, int, false>(indptr, indices, wptr, n, key, stop, first, end);
}
extern "C" __global__ void gj_irw_walks_i64(const long long* indptr, const long long* indices,
        const long long* wptr, long long n, unsigned long long key, double stop, int first,
        long long* end) {
    gj_walks<long long, long long, false>(indptr, indices, wptr, n, key, stop, first, end);
}
extern "C" __global__ void gj_irw_keys_i32(const long long* indptr, const int* indices,
        const long long* wptr, long long n, unsigned long long key, double stop, int first, long long* out) {
    gj_walks<int, long long, true>(indptr, indices, wptr, n, key, stop, first, out);
}
extern "C" __global__ void gj_irw_keys_i64(const long long* indptr, const long long* indices,
        const long long* wptr, long long n, unsigned long long key, double stop, int first,
        long long* out) {
    gj_walks<long long, long long, true>(indptr, indices, wptr, n, key, stop, first, out);
}
"""
)


WALKS = Kernel(
    WALKS_KERNEL,
    ("gj_irw_walks_i32", "gj_irw_walks_i64", "gj_irw_keys_i32", "gj_irw_keys_i64"),
    defines=MIX_DEFINES,
    label="irw-walks",
)


def _walks_gpu(indptr, indices, wptr, key, stop, first, out, keys):
    kind = "keys" if keys else "walks"
    name = f"gj_irw_{kind}_{'i32' if indices.dtype == np.int32 else 'i64'}"
    grid, block = launch_config(int(out.size), 256)
    n = np.int64(wptr.size - 1)
    args = (indptr, indices, wptr, n, np.uint64(key), stop, np.int32(first), out)
    WALKS.get(name)(grid, block, args)


def _walks(indptr, indices, omega, key: int, alpha: float, first_step: bool, keys: bool, progress=None):
    xp = array_module(indptr)
    wptr = xp.zeros(omega.size + 1, dtype=np.int64)
    xp.cumsum(omega, out=wptr[1:])
    total = int(wptr[-1])
    out = xp.empty(total, dtype=np.int64 if keys else indices.dtype)
    args = (np.uint64(key), np.float64(1.0 - alpha), bool(first_step), out, keys)
    if total and xp is not np:
        _walks_gpu(indptr, indices, wptr, *args)
    elif total:  # with progress, PROGRESS_STEPS runs over the start vertices of about as many walks each
        n = omega.size
        steps = PROGRESS_STEPS if progress is not None else 1
        cuts = np.searchsorted(wptr, np.linspace(0, total, steps + 1)[1:-1]).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, n], strict=True):
            if hi > lo:
                _walks_cpu(indptr, indices, wptr, np.int64(lo), np.int64(hi), *args)
                report(progress, wptr[hi], total, "walks")
    report(progress, total, total, "walks")
    return out, wptr


def walk_ends(indptr, indices, omega, key: int, alpha: float, *, first_step: bool = False):
    """End vertex of every index walk (-1: returned to the source), and each start's first walk;
    ``first_step``: walks do not stop before their first step."""
    return _walks(indptr, indices, omega, key, alpha, first_step, False)


def walk_keys(
    indptr, indices, omega, key: int, alpha: float, *, first_step: bool = False, progress=None
) -> list:
    """The same walks as ``walk_ends``, each as the sort key of its (end, start) pair: ``end * n +
    start``, or ``start - n`` (negative) for a walk that returned to the source. In a list, for
    ``walk_pairs`` to empty: 8 bytes a walk, where the ends and the starts cost 16 to 20 more.
    ``progress(done, total, "walks")`` as they are drawn (``operators._progress``)."""
    return [_walks(indptr, indices, omega, key, alpha, first_step, True, progress)[0]]


FIRST_LEVEL = 16  # budget scheme: multipliers 16, 8, 4, 2 take 1/2, 1/4, 1/8, then the rest


def budget_levels(base_in_order: np.ndarray, budget: float) -> np.ndarray:
    """Walk multiplier of each vertex in PRO-rank order (Sec. 3.3.2).

    Multiplier a = FIRST_LEVEL is given down the list until half of the extra budget is spent,
    then a/2 until three quarters are, ..., and a = 2 until the budget is used up.
    """
    level = np.ones(base_in_order.size, dtype=np.int64)
    total = math.floor(budget * float(base_in_order.sum()))
    used, pos, a, share = 0, 0, FIRST_LEVEL, 0.5
    while a >= 2 and pos < level.size and used < total:
        goal = total if a == 2 else math.floor(total * share)
        cum = used + np.cumsum((a - 1) * base_in_order[pos:])
        take = int(np.searchsorted(cum, goal, side="right"))
        if take:
            level[pos : pos + take] = a
            used = int(cum[take - 1])
            pos += take
        a //= 2
        share += (1 - share) / 2
    return level
