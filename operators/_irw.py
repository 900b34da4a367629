"""Random walks of the kPAR index and their inversion into the doubled-CSR IRW layout.

Walk ``w`` (numbered through all start vertices, ``wptr`` gives each start's first walk) draws
``rand_unit(mix64(key + w * GOLDEN), c)`` for its c-th number, so CPU and GPU produce the same walks
for the same seed. At each step the walk stops with probability ``1 - alpha``; otherwise it moves to
a uniform out-neighbour, or, at a vertex without out-edges, it "returns to the source" (end -1).
With ``first`` set, a walk never stops before its first step (the index's walks: the query then adds
the (1 - alpha) share of a start's residue that immediate stops would estimate, exactly; the draws
are the same, the first stop draw is unused).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphs._device import array_module, get_kernel, launch_config
from graphs._mix import MIX_CUDA, mix64, rand_unit

_U_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


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
def _walks_cpu(indptr, indices, wptr, key, stop, first, end):
    n = wptr.size - 1
    for v in nb.prange(n):
        for w in range(wptr[v], wptr[v + 1]):
            kw = mix64(key + np.uint64(w) * _U_GOLDEN)
            end[w] = _walk_cpu(indptr, indices, v, kw, stop, first)


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
template <typename I>
__device__ void gj_walks(const long long* indptr, const I* indices, const long long* wptr, long long n,
                         unsigned long long key, double stop, int first, I* end) {
    long long total = wptr[n], stride = (long long)gridDim.x * blockDim.x;
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < total; w += stride) {
        long long lo = 0, hi = n;  // the start vertex: last v with wptr[v] <= w
        while (hi - lo > 1) {
            long long mid = (lo + hi) >> 1;
            if (wptr[mid] <= w) lo = mid; else hi = mid;
        }
        unsigned long long kw = gj_mix64(key + (unsigned long long)w * GJ_GOLDEN);
        end[w] = (I)gj_walk<I>(indptr, indices, lo, kw, stop, first);
    }
}
extern "C" __global__ void gj_irw_walks_i32(const long long* indptr, const int* indices,
        const long long* wptr, long long n, unsigned long long key, double stop, int first, int* end) {
    gj_walks<int>(indptr, indices, wptr, n, key, stop, first, end);
}
extern "C" __global__ void gj_irw_walks_i64(const long long* indptr, const long long* indices,
        const long long* wptr, long long n, unsigned long long key, double stop, int first,
        long long* end) {
    gj_walks<long long>(indptr, indices, wptr, n, key, stop, first, end);
}
"""
)


def _walks_gpu(indptr, indices, wptr, key, stop, first, end):
    name = "gj_irw_walks_i32" if indices.dtype == np.int32 else "gj_irw_walks_i64"
    grid, block = launch_config(int(end.size), 256)
    n = np.int64(wptr.size - 1)
    args = (indptr, indices, wptr, n, np.uint64(key), stop, np.int32(first), end)
    get_kernel(WALKS_KERNEL, name)(grid, block, args)


def walk_ends(indptr, indices, omega, key: int, alpha: float, *, first_step: bool = False):
    """End vertex of every index walk (-1: returned to the source), and each start's first walk;
    ``first_step``: walks do not stop before their first step."""
    xp = array_module(indptr)
    wptr = xp.zeros(omega.size + 1, dtype=np.int64)
    xp.cumsum(omega, out=wptr[1:])
    total = int(wptr[-1])
    end = xp.empty(total, dtype=indices.dtype)
    if total:
        run = _walks_gpu if xp is not np else _walks_cpu
        run(indptr, indices, wptr, np.uint64(key), np.float64(1.0 - alpha), bool(first_step), end)
    return end, wptr


def walk_pairs(end, omega, n: int) -> list:
    """The walks' distinct (end, start) pairs as keys ``end * n + start`` in increasing order, each
    pair's number of walks, and ``ret[v]``: the walks from v that returned to the source.

    Returned in a list that ``invert_walks`` empties, so that each array is freed as soon as it is
    used: at R-MAT 24 with delta_min = 2/n there are 1.1 billion walks. One sort of the keys does all:
    a returned walk (end -1) has the key start - n < 0, so they come first.
    """
    xp = array_module(end)
    key = end.astype(np.int64)
    key *= n
    key += xp.repeat(xp.arange(n, dtype=end.dtype), omega.astype(np.int64))
    key.sort()
    back = int(xp.searchsorted(key, xp.zeros(1, dtype=np.int64))[0])
    ret = xp.bincount(key[:back] + n, minlength=n).astype(np.int32)
    key = key[back:]
    if key.size:
        first = xp.flatnonzero(xp.concatenate([xp.ones(1, dtype=bool), key[1:] != key[:-1]]))
        freq = xp.diff(xp.concatenate([first, xp.asarray([key.size])])).astype(np.int32)
        key = key[first]
    else:
        freq = xp.zeros(0, dtype=np.int32)
    return [key, freq, ret]


def invert_walks(pairs: list, n: int, high_share: float):
    """The IRW arrays of the walks' (start, end) pairs (``walk_pairs``, emptied here), with the
    high-IRW set H moved out (Fig. 2, 4).

    IRW: ``ip1/starts`` lists, per end vertex t, the distinct start vertices of walks ending at t,
    those with frequency > 1 first, and ``ip2/freqs`` the frequencies of those first entries only
    (the rest are 1). ``ret[v]``: walks from v that returned to the source. H holds the vertices
    with the most walks ending at them: ``omega_I(t) >= T`` for the smallest T that keeps
    ``|H| <= high_share * n``; their pairs move to ``hptr/h_end/h_freq``, grouped by start vertex.
    """
    key, freq, ret = pairs
    pairs.clear()
    xp = array_module(key)
    ids = np.int32 if n < 2**31 else np.int64
    t, v = (key // n).astype(ids), (key % n).astype(ids)
    del key
    omega_i = xp.bincount(t, weights=freq.astype(np.float64), minlength=n).astype(np.int64)
    cap = int(high_share * n)
    ranked = xp.sort(omega_i)[::-1]
    if 0 < cap < n:
        ub = int(ranked[cap])
        in_h = omega_i >= ub + 1
    else:
        ub = int(ranked[0]) if n else 0
        in_h = xp.zeros(n, dtype=bool)
    high = xp.flatnonzero(in_h)
    h_index = xp.full(n, -1, dtype=np.int32)
    h_index[high] = xp.arange(high.size, dtype=np.int32)
    pair_h = in_h[t]
    # H pairs grouped by start vertex (Fig. 4): hptr[v] starts v's (end index in H, frequency) pairs
    ht, hv, hf = t[pair_h], v[pair_h], freq[pair_h]
    order = xp.argsort(hv.astype(np.int64) * n + ht)
    ht, hv, hf = ht[order], hv[order], hf[order]
    h_store = dict(
        high=high.astype(np.int32), h_index=h_index, hptr=_indptr(xp, hv, n), h_end=h_index[ht], h_freq=hf
    )
    del ht, hv, hf, order
    # IRW proper: the pairs are in (end, start) order; each end vertex's starts with frequency > 1 go
    # first, so a pair moves to its end's first slot plus its rank among the pairs of its kind
    lo = ~pair_h
    t, v, freq = t[lo], v[lo], freq[lo]
    del lo, pair_h
    sig = freq > 1
    ip1, ip2 = _indptr(xp, t, n), _indptr(xp, t[sig], n)
    before = xp.cumsum(sig) - sig  # pairs with frequency > 1 before this one
    pos = xp.where(sig, ip1[t] - ip2[t] + before, ip2[t + 1] + xp.arange(t.size) - before)
    del before
    starts = xp.empty(v.size, dtype=np.int32)
    starts[pos] = v
    irw = dict(ip1=ip1, starts=starts, ip2=ip2, freqs=freq[sig])
    return {**irw, **h_store, "ret": ret, "omega_i": omega_i}, ub


def _indptr(xp, rows, n):
    ptr = xp.zeros(n + 1, dtype=np.int64)
    xp.cumsum(xp.bincount(rows, minlength=n), out=ptr[1:])
    return ptr
