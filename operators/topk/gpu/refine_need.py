"""GPU estimates of the refinement's need list (``_topk_refine_gpu``): the in-neighbours of the band that
the round did not list, each once. Their walk parts are summed as Alg. 6 sums a candidate's
(``_topk_gpu_estimate``), a tile per start list, from the walk weights r(v) / omega(v) written for the
query's touched vertices first and cleared after; lists of more than SAMPLE_FROM entries are read at
SAMPLE_STRIDE (``_topk_refine``). A list of which more than ``BIG_LIST`` entries are read is cut into
chunks of ``BIG_CHUNK`` entries read, a warp each over the whole GPU, and the chunks' sums are added in
order: a block per long list, as a round does, would leave a few blocks with the hubs' lists while
the others idle, and chunk offsets by a one-block scan would cost about as much again. Since lists are
read in part, few lists are that long.
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.registry import Kernel
from operators.topk.gpu.args import LaunchArgs
from operators.topk.gpu.bound import Candidates
from operators.topk.gpu.estimate import BIG_STEPS
from operators.topk.gpu.frontier import TSIZE
from operators.topk.gpu.push import VERTEX_CUDA, VERTEX_DEFINES
from operators.topk.refine import SAMPLE_FROM, SAMPLE_STRIDE

RP_S = 5  # the source's place in the refinement's parameter block (``_topk_refine_gpu.RP``)

BIG_LIST = BIG_STEPS * TSIZE  # start lists longer than this go in chunks
BIG_CHUNK = 512  # entries of a chunk (16 steps of a warp)
BIG_SHIFT = 40  # the long lists' counter: their number above this bit, their chunks below

NEED_KERNELS = r"""
// the walk weights r(v) / omega(v) of the query's touched vertices into w[] (set), or w[] back to zero:
// a start list's entry then costs one random read, not two (r and 1 / omega); nothing for an empty list
extern "C" __global__ void gj_refine_weights(const int* touched, const int* ntouched, const gj_vertex* vs,
        const double* inv_omega, const int* nneed, int set, double* w) {
    const int nt = *nneed ? *ntouched : 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nt; i += gridDim.x * blockDim.x) {
        const int v = touched[i];
        w[v] = set ? vs[v].r * inv_omega[v] : 0.0;
    }
}
// the walks of entries [j0, hi) of a start list from lo that a thread of `step` takes (gj_irw_sum's, by w)
__device__ __forceinline__ double gj_refine_walks(long long lo, long long j0, long long hi, long long step,
        long long f0, long long nf, const int* starts, const int* freqs, const double* w) {
    double acc = 0.0;
    for (long long j = j0; j < hi; j += step) {
        const double wv = w[starts[j]];
        if (wv > 0.0) acc += wv * (j - lo < nf ? (double)freqs[f0 + j - lo] : 1.0);
    }
    return acc;
}
// the entries of need vertex u's start list [lo, hi) that are read: from lo + *off every *stride-th (lists
// longer than SAMPLE_FROM, s the source: _topk_refine.sample_offset), else all; returns how many
__device__ __forceinline__ long long gj_sampled(int u, int s, long long lo, long long hi, int* off,
        int* stride) {
    *off = 0;
    *stride = 1;
    if (hi - lo > SAMPLE_FROM) {
        unsigned h = (unsigned)u * 0x9E3779B1u + (unsigned)s * 0x85EBCA77u;
        h ^= h >> 15;
        h *= 0x2C1B3C6Du;
        h ^= h >> 12;
        *off = (int)(h & (SAMPLE_STRIDE - 1));
        *stride = SAMPLE_STRIDE;
    }
    return (hi - lo - *off + *stride - 1) / *stride;
}
// the walk part of each need vertex's estimate, a tile of tsize threads per vertex. A start list of more
// than BIG_LIST entries read is left to gj_refine_big: one atomic on *bc takes its slot i (bits BIG_SHIFT
// up) and its first chunk (the bits below), so big[i] (its position) and cbase[i] (its first chunk) rise
// together
extern "C" __global__ void gj_refine_walk_sums(const int* need, const int* nneed, int tsize,
        unsigned long long* bc, int* big, long long* cbase, const long long* ip1, const int* starts,
        const long long* ip2, const int* freqs, const double* w, const double* rp, double* out) {
    const int tl = threadIdx.x % tsize, per_warp = 32 / tsize, s = (int)rp[RP_S];
    const long long count = *nneed;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const long long nwarps = (long long)gridDim.x * blockDim.x / 32;
    for (long long base = warp * per_warp; base < count; base += nwarps * per_warp) {  // warp-uniform
        const long long c = base + (threadIdx.x & 31) / tsize;
        double acc = 0.0;
        if (c < count) {
            const int u = need[c];
            const long long lo = ip1[u], hi = ip1[u + 1], f0 = ip2[u];
            int off, stride;
            const long long read = gj_sampled(u, s, lo, hi, &off, &stride);
            if (read <= BIG_LIST) {
                const long long j0 = lo + off + (long long)stride * tl;
                const long long step = (long long)stride * tsize;
                acc = stride * gj_refine_walks(lo, j0, hi, step, f0, ip2[u + 1] - f0, starts, freqs, w);
            } else if (tl == 0) {
                const unsigned long long chunks = (read + BIG_CHUNK - 1) / BIG_CHUNK;
                const unsigned long long got = atomicAdd(bc, (1ULL << BIG_SHIFT) + chunks);
                const long long i = (long long)(got >> BIG_SHIFT);
                big[i] = (int)c;
                cbase[i] = (long long)(got & ((1ULL << BIG_SHIFT) - 1));
            }
        }
        for (int o = tsize / 2; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o, tsize);
        if (c < count && tl == 0) out[c] = acc;
    }
}
// a warp per chunk of the long start lists (BIG_CHUNK entries read): its walks into part[chunk]
extern "C" __global__ void gj_refine_big(const int* need, const unsigned long long* bc, const int* big,
        const long long* cbase, const long long* ip1, const int* starts, const long long* ip2,
        const int* freqs, const double* w, const double* rp, double* part) {
    const int nbig = (int)(*bc >> BIG_SHIFT), s = (int)rp[RP_S];
    const long long total = (long long)(*bc & ((1ULL << BIG_SHIFT) - 1));
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long g = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; g < total; g += nwarps) {
        int lo = 0, hi = nbig;  // the list of chunk g: the last i with cbase[i] <= g
        while (hi - lo > 1) { const int mid = (lo + hi) >> 1; if (cbase[mid] <= g) lo = mid; else hi = mid; }
        const int u = need[big[lo]];
        const long long l0 = ip1[u], l1 = ip1[u + 1], f0 = ip2[u];
        int off, stride;
        gj_sampled(u, s, l0, l1, &off, &stride);
        const long long e0 = l0 + off + (g - cbase[lo]) * BIG_CHUNK * stride;
        double acc = gj_refine_walks(l0, e0 + (long long)stride * (threadIdx.x & 31),
                                     min(e0 + (long long)BIG_CHUNK * stride, l1), 32LL * stride, f0,
                                     ip2[u + 1] - f0, starts, freqs, w);
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if ((threadIdx.x & 31) == 0) part[g] = stride * acc;
    }
}
// a warp per long start list: its chunks' sums, in order, as its walk part
extern "C" __global__ void gj_refine_big_sum(const int* need, const unsigned long long* bc, const int* big,
        const long long* cbase, const long long* ip1, const double* rp, const double* part, double* out) {
    const int nbig = (int)(*bc >> BIG_SHIFT), lane = threadIdx.x & 31, s = (int)rp[RP_S];
    const int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < nbig; i += nwarps) {
        const int u = need[big[i]];
        int off, stride;
        const long long n = (gj_sampled(u, s, ip1[u], ip1[u + 1], &off, &stride) + BIG_CHUNK - 1) / BIG_CHUNK;
        double acc = 0.0;
        for (long long c = lane; c < n; c += 32) acc += part[cbase[i] + c];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0) out[big[i]] = acc;
    }
}
// each need vertex's estimate (pi0, the residue's own share, its walks, H's part) into dense[], and its
// mark cleared for the next query
extern "C" __global__ void gj_refine_scatter(const int* need, const int* nneed, const double* walks,
        const gj_vertex* vs, const double* pi0, const int* h_index, const double* est_h, double own,
        double* dense, int* mark) {
    const int count = *nneed;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < count; c += gridDim.x * blockDim.x) {
        const int u = need[c], h = h_index[u];
        dense[u] = pi0[u] + own * vs[u].r + walks[c] + (h >= 0 ? est_h[h] : 0.0);
        mark[u] = 0;
    }
}
"""


def need_variant() -> dict:
    """The variant of ``NEED`` launched: lists of more than ``BIG_LIST`` entries read in chunks of
    ``BIG_CHUNK`` (module values, read at the launch; tests take the chunked path with small ones)."""
    return {"BIG_LIST": BIG_LIST, "BIG_CHUNK": BIG_CHUNK}


class NeedBuffers:
    """A workspace's need-list buffers: marks and walk weights (both zero between queries), the counts
    (``counts``: the band's size and the need list's, int32 each, then the long lists' counter; zeroed
    before each refinement), and the long lists' slots and chunk sums, sized for the index's lists of
    more than BIG_LIST entries read (``need_variant``)."""

    def __init__(self, index) -> None:
        cp = import_cupy()
        n = index.graph.n
        self.mark = cp.zeros(n, dtype=cp.int32)
        self.w = cp.zeros(n, dtype=cp.float64)
        self.counts = cp.zeros(2, dtype=cp.uint64)
        self.nband, self.nneed = self.counts[:1].view(cp.int32)[:1], self.counts[:1].view(cp.int32)[1:]
        self.bc = self.counts[1:]
        sizes, variant = index.cache.setdefault("need_sizes", dict), (BIG_LIST, BIG_CHUNK)
        if variant not in sizes:
            sizes[variant] = _long_lists(index)
        lists, chunks = sizes[variant]
        self.cbase = cp.empty(max(lists, 1), dtype=cp.int64)
        self.part = cp.empty(max(chunks, 1), dtype=cp.float64)
        self.args = LaunchArgs()  # ``estimate_need``'s


def _long_lists(index) -> tuple[int, int]:
    """The index's lists of more than BIG_LIST entries read, and their chunks of BIG_CHUNK (computed once
    per index: its temporaries take about 26 bytes a vertex)."""
    cp = import_cupy()
    lengths = cp.diff(index.arrays["ip1"])
    # entries read, at most: a sampled list's from offset 0
    read = cp.where(lengths > SAMPLE_FROM, (lengths + SAMPLE_STRIDE - 1) // SAMPLE_STRIDE, lengths)
    long_lists = read[read > BIG_LIST]
    return int(long_lists.size), int(((long_lists + BIG_CHUNK - 1) // BIG_CHUNK).sum())


NEED = Kernel(
    VERTEX_CUDA + NEED_KERNELS,
    ("gj_refine_weights", "gj_refine_walk_sums", "gj_refine_big", "gj_refine_big_sum", "gj_refine_scatter"),
    defines={
        "BIG_SHIFT": BIG_SHIFT,
        "SAMPLE_FROM": SAMPLE_FROM,
        "SAMPLE_STRIDE": SAMPLE_STRIDE,
        "RP_S": RP_S,
        **VERTEX_DEFINES,
    },
    variants=(need_variant(),),
    label="topk-refine-need",
)


def _kernel(name: str):
    return NEED.get(name, **need_variant())


def estimate_need(nb: NeedBuffers, cands: Candidates, rp, sm_blocks: int) -> None:
    """Queue the estimates of the ``nb.nneed`` vertices listed in ``cands.ids`` past H into the push's
    ``bigval`` (the dense estimates) on the current stream, their walk parts through ``cands.est`` past H;
    marks and weights are cleared (the arguments made once per workspace; grids of ``sm_blocks`` times 4)."""
    weights, walk_sums, big, big_sum, scatter = nb.args.get(("refine-need",), lambda: _args(nb, cands, rp))
    grid = (sm_blocks * 4,)
    _kernel("gj_refine_weights")(grid, (256,), (*weights, np.int32(1), nb.w))
    _kernel("gj_refine_walk_sums")(grid, (256,), walk_sums)
    _kernel("gj_refine_big")(grid, (256,), big)
    _kernel("gj_refine_big_sum")(grid, (256,), big_sum)
    _kernel("gj_refine_weights")(grid, (256,), (*weights, np.int32(0), nb.w))
    _kernel("gj_refine_scatter")(grid, (256,), scatter)


def _args(nb: NeedBuffers, c: Candidates, rp):
    p = c.push
    a = c.index.arrays
    need, got = c.ids[c.nh :], c.est[c.nh :]
    lists = (a["ip1"], a["starts"], a["ip2"], a["freqs"], nb.w)
    spread = (need, nb.bc, p.big, nb.cbase)
    own = np.float64(c.index.params.own_share)
    return (
        (p.touched, p.counts[3:], p.state, c.constants.inv_omega, nb.nneed),
        (need, nb.nneed, np.int32(TSIZE), nb.bc, p.big, nb.cbase, *lists, rp, got),
        (*spread, *lists, rp, nb.part),
        (*spread, a["ip1"], rp, nb.part, got),
        (need, nb.nneed, got, p.state, p.pi0, a["h_index"], c.est_h, own, p.bigval, nb.mark),
    )
