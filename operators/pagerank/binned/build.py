"""The binned layout's build on the GPU: a sort key per in-edge, then each sorted edge's offsets placed.

Called by ``_pagerank_binned.binned_layout`` for device arrays; two kernels over int32 rows and sources, so
that no 8-byte temporaries of the edge count are made besides the keys themselves.
"""

from __future__ import annotations

import numpy as np

from graphs._build import expand_rows
from graphs._device import import_cupy
from operators._gpu.device import sm_count
from operators._gpu.launch import launch_config
from operators._gpu.registry import Kernel

LAYOUT_KERNELS = r"""
// Layout build: the sort key of every in-edge from its int32 source and row (renumbered by `rank` when
// given), then each sorted edge's offsets written at its padded position (and its weight, by `order`).
extern "C" __global__ void gj_binned_keys(const int* __restrict__ src, const int* __restrict__ row,
        const long long* __restrict__ rank, int renumber, long long m, long long nbins, int cb, int bb,
        long long* __restrict__ key) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        const long long u = renumber ? rank[src[e]] : (long long)src[e];
        const long long v = renumber ? rank[row[e]] : (long long)row[e];
        key[e] = (((u >> cb) * nbins + (v >> bb)) << (cb + bb)) | ((v & ((1LL << bb) - 1)) << cb)
                 | (u & ((1LL << cb) - 1));
    }
}
extern "C" __global__ void gj_binned_place(const long long* __restrict__ key,
        const long long* __restrict__ shift, long long m, int cb, int bb, unsigned short* __restrict__ src,
        unsigned short* __restrict__ dst, int weighted, const float* __restrict__ w_in,
        const long long* __restrict__ order, float* __restrict__ w_out) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        const long long k = key[e];
        const long long p = e + shift[k >> (cb + bb)];
        src[p] = (unsigned short)(k & ((1LL << cb) - 1));
        dst[p] = (unsigned short)((k >> cb) & ((1LL << bb) - 1));
        if (weighted) w_out[p] = w_in[order[e]];
    }
}
"""


LAYOUT = Kernel(LAYOUT_KERNELS, ("gj_binned_keys", "gj_binned_place"), label="binned-layout")


def edge_keys(indptr_t, indices_t, rank, nbins: int, chunk_bits: int, bin_bits: int):
    """``_pagerank_binned``'s sort keys on the GPU (int64, one per in-edge)."""
    cp = import_cupy()
    m = int(indices_t.shape[0])
    key = cp.empty(m, dtype=cp.int64)
    if m:
        row = expand_rows(indptr_t, m).astype(cp.int32, copy=False)
        grid, block = launch_config(m, 256, max_blocks=sm_count() * 32)
        renumber = rank is not None
        rank = rank if renumber else cp.zeros(1, dtype=cp.int64)
        args = (
            indices_t.astype(cp.int32, copy=False),
            row,
            rank,
            np.int32(renumber),
            np.int64(m),
            np.int64(nbins),
            np.int32(chunk_bits),
            np.int32(bin_bits),
            key,
        )
        LAYOUT.get("gj_binned_keys")(grid, block, args)
    return key


def place_edges(key, shift, chunk_bits: int, bin_bits: int, out: dict, weights_t, order) -> None:
    """Write the sorted ``key``'s offsets (and weights, taken in ``order``) into ``out``'s padded arrays."""
    m = int(key.size)
    if not m:
        return
    grid, block = launch_config(m, 256, max_blocks=sm_count() * 32)
    cp = import_cupy()
    weighted = weights_t is not None
    none_f, none_i = cp.zeros(1, dtype=cp.float32), cp.zeros(1, dtype=cp.int64)
    args = (
        key,
        shift,
        np.int64(m),
        np.int32(chunk_bits),
        np.int32(bin_bits),
        out["src"],
        out["dst"],
        np.int32(weighted),
        weights_t if weighted else none_f,
        order if weighted else none_i,
        out["w"] if weighted else none_f,
    )
    LAYOUT.get("gj_binned_place")(grid, block, args)
