"""The touched list of a top-k PPR query rebuilt from its seen flags after a push, in vertex order.

The push sets ``seen[v]`` for every vertex that receives a share (``_topk_gpu_push``); listing them
afterwards, in order, costs one sequential pass over n bytes, where listing first receivers during the
push took 45% of the push at R-MAT 22-24. Counting with four loads of a thread in flight, and loading
each next word before a step's block scan, took it from 49 to 30 us a query at R-MAT 24 k = 10
(results/topk-claimed-seen-ab-h100.txt).
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel

from ._cuda_blocks import SCAN_CUDA
from ._topk_gpu_push import PUSH_DEVICE, THREADS

LIST_SEEN_CUDA = r"""
// a 16-byte word of flags (vertices 16 w to 16 w + 15) as a 16-bit mask, bit i for vertex 16 w + i; a
// flag is any nonzero byte (vcmpne4 sets a byte to 0xff, the multiply gathers the four bytes' low bits)
__device__ __forceinline__ unsigned gj_seen_mask(uint4 x) {
    const unsigned b[4] = {x.x, x.y, x.z, x.w};
    unsigned m = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) m |= (((__vcmpne4(b[i], 0u) & 0x01010101u) * 0x01020408u) >> 24) << (4 * i);
    return m;
}
// the touched list rebuilt from the seen flags, in vertex order (one cooperative launch): each block
// counts the flags of its range of words (SEEN_AHEAD loads of a thread in flight), then lists its
// vertices after the earlier blocks' (the next word's load out before each step's block scan). The
// flags' buffer is whole words, zero past n (GPUQuery.seen_words)
extern "C" __global__ void __launch_bounds__(GJ_T, 4) gj_list_seen(const uint4* words, long long n,
        int* touched, int* ntouched, long long* bsum) {
    cg::grid_group grid = cg::this_grid();
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const long long nw = (n + 15) >> 4, per = (nw + gridDim.x - 1) / gridDim.x;
    const long long lo = min(per * blockIdx.x, nw), hi = min(lo + per, nw);
    long long mine = 0, base, all;
    for (long long w = lo + threadIdx.x; w < hi; w += SEEN_AHEAD * GJ_T) {
        uint4 x[SEEN_AHEAD];
#pragma unroll
        for (int j = 0; j < SEEN_AHEAD; ++j) x[j] = w + j * GJ_T < hi ? words[w + j * GJ_T] : zero;
#pragma unroll
        for (int j = 0; j < SEEN_AHEAD; ++j) mine += __popc(gj_seen_mask(x[j]));
    }
    gj_block_scan(mine, &all);
    if (threadIdx.x == 0) bsum[blockIdx.x] = all;
    grid.sync();
    long long before = 0, total = 0;
    for (int b = threadIdx.x; b < gridDim.x; b += GJ_T) {
        total += bsum[b];
        if (b < blockIdx.x) before += bsum[b];
    }
    gj_block_scan(before, &base);
    gj_block_scan(total, &all);
    if (blockIdx.x == 0 && threadIdx.x == 0) *ntouched = (int)all;
    uint4 next = lo + threadIdx.x < hi ? words[lo + threadIdx.x] : zero;
    for (long long w0 = lo; w0 < hi; w0 += GJ_T) {  // block-uniform
        const long long w = w0 + threadIdx.x;
        unsigned m = gj_seen_mask(next);
        next = w + GJ_T < hi ? words[w + GJ_T] : zero;
        long long tile;
        int* out = touched + base + gj_block_scan(__popc(m), &tile);
        for (; m; m &= m - 1) *out++ = (int)((w << 4) + __ffs(m) - 1);
        base += tile;
    }
}
"""
SEEN_AHEAD = 4  # words of flags a thread loads at once while counting
LIST_SEEN_KERNEL = f"#define SEEN_AHEAD {SEEN_AHEAD}\n" + PUSH_DEVICE + SCAN_CUDA + LIST_SEEN_CUDA


def list_seen(q) -> None:
    """Rebuild ``q.touched`` (and its count) from the seen flags after a push, in vertex order."""
    args = (q.seen_words, np.int64(q.seen.size), q.touched, q.counts[3:], q.bsum)
    get_kernel(LIST_SEEN_KERNEL, "gj_list_seen", cooperative=True)((q.blocks,), (THREADS,), args)
