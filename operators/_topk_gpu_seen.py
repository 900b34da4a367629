"""The touched list of a top-k PPR query rebuilt from its seen flags after a push, in vertex order.

The push sets ``seen[v]`` for every vertex that receives a share (``_topk_gpu_push``); listing them
afterwards, in order, costs one sequential pass over n bytes, where listing first receivers during the
push took 45% of the push at R-MAT 22-24.
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel

from ._cuda_blocks import SCAN_CUDA
from ._topk_gpu_push import PUSH_DEVICE, THREADS

LIST_SEEN_CUDA = r"""
// the flags of vertices [16 w, 16 w + 16) as a 16-bit mask (bit i: vertex 16 w + i); a flag is any
// nonzero byte (vcmpne4 sets a byte to 0xff, the multiply gathers the four bytes' low bits)
__device__ __forceinline__ unsigned gj_seen_mask(const unsigned char* seen, long long n, long long w) {
    const long long v0 = w << 4;
    unsigned b[4] = {0u, 0u, 0u, 0u};
    if (v0 + 16 <= n) {
        const uint4 x = *reinterpret_cast<const uint4*>(seen + v0);
        b[0] = x.x; b[1] = x.y; b[2] = x.z; b[3] = x.w;
    } else {
        for (int i = 0; v0 + i < n; ++i) b[i >> 2] |= (unsigned)seen[v0 + i] << (8 * (i & 3));
    }
    unsigned m = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) m |= (((__vcmpne4(b[i], 0u) & 0x01010101u) * 0x01020408u) >> 24) << (4 * i);
    return m;
}
// the touched list rebuilt from the seen flags, in vertex order (one cooperative launch): each block
// counts the flags of its range of 16-byte words, then lists its vertices after the earlier blocks'
extern "C" __global__ void __launch_bounds__(GJ_T, 4) gj_list_seen(const unsigned char* seen, long long n,
        int* touched, int* ntouched, long long* bsum) {
    cg::grid_group grid = cg::this_grid();
    const long long words = (n + 15) >> 4, per = (words + gridDim.x - 1) / gridDim.x;
    const long long lo = min(per * blockIdx.x, words), hi = min(lo + per, words);
    long long mine = 0, base, all;
    for (long long w = lo + threadIdx.x; w < hi; w += GJ_T) mine += __popc(gj_seen_mask(seen, n, w));
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
    for (long long w0 = lo; w0 < hi; w0 += GJ_T) {  // block-uniform
        const long long w = w0 + threadIdx.x;
        unsigned m = w < hi ? gj_seen_mask(seen, n, w) : 0u;
        long long tile;
        int* out = touched + base + gj_block_scan(__popc(m), &tile);
        for (; m; m &= m - 1) *out++ = (int)((w << 4) + __ffs(m) - 1);
        base += tile;
    }
}
"""
LIST_SEEN_KERNEL = PUSH_DEVICE + SCAN_CUDA + LIST_SEEN_CUDA


def list_seen(q) -> None:
    """Rebuild ``q.touched`` (and its count) from the seen flags after a push, in vertex order."""
    args = (q.seen, np.int64(q.seen.size), q.touched, q.counts[3:], q.bsum)
    get_kernel(LIST_SEEN_KERNEL, "gj_list_seen", cooperative=True)((q.blocks,), (THREADS,), args)
