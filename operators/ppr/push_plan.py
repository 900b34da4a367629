"""Sizes and per-graph plan of the GPU push/pull PPR solver (``_ppr_push_gpu``): the residue matrix's
row stride, the default batch of sources, and the transposed graph with the pull sweep's fixed
statistics."""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators.ppr.cost import HYBRID, PULL, pull_static

ITEM_BYTES = {np.float64: 5 * 8 + 3 * 4, np.float32: 5 * 4 + 3 * 4}  # r, r_in, p, msg, msg2, 3 lists
MAX_ITEMS = 2**31 - 2**20  # items are int32 (with room for a block's overshoot)


def row_stride(n: int, cost) -> int:
    """Entries per row of the residue matrix: n rounded up so that every row maps vertex v to the
    same block and warp (hence pull's statistics of ns rows are ns times those of one)."""
    unit = cost.warps * cost.blocks
    return -(-max(n, 1) // unit) * unit


def batch_size(
    n: int, dtype, cost, *, mode: int = HYBRID, dense: bool = False, limit_bytes: int | None = None
) -> int:
    """Sources per batch by default: at most 128 (the benchmark graphs' throughput stops rising from 64 on),
    within a quarter of the free GPU memory (CuPy's pool included) or ``limit_bytes``. Pull sweeps every row's
    in-edges, so it batches only up to 2**20 residues: batching pays off for small graphs only. So do
    ``dense`` solves (to an L1 bound, where nearly every vertex of a row turns active): their batches of
    more rows ran no faster per source than one at a time, the hybrid's slower (it pushed them; see
    benchmarks/RESULTS.md, single-source PPR on the GPU)."""
    stride = row_stride(n, cost)
    if limit_bytes is None:
        cp = import_cupy()
        limit_bytes = cp.cuda.Device().mem_info[0] + cp.get_default_memory_pool().free_bytes()
    by_memory = (limit_bytes // 4) // (ITEM_BYTES[np.dtype(dtype).type] * stride)
    most = 2**20 // stride if mode == PULL or dense else 128
    return int(max(1, min(128, most, by_memory, MAX_ITEMS // stride)))


def big_lists(in_deg: np.ndarray, cost) -> tuple[np.ndarray, np.ndarray]:
    """The vertices that the pull sweep sums with a whole block (in-degree >= lanes * warps), grouped by
    the block whose slots they are: block i's are ``vertices[ptr[i]:ptr[i + 1]]``, in increasing order."""
    big = np.flatnonzero(np.asarray(in_deg) >= cost.lanes * cost.warps).astype(np.int32)
    block = (big // cost.warps) % cost.blocks
    order = np.argsort(block, kind="stable")
    ptr = np.zeros(cost.blocks + 1, np.int32)
    np.cumsum(np.bincount(block, minlength=cost.blocks), out=ptr[1:])
    return ptr, big[order]


def build_plan(G, cost):
    """Transposed CSR, out-degrees (also on the host, for the hybrid's first decision), the pull
    sweep's fixed statistics (on the GPU, and the largest block plus warp term of one row) and its
    lists of large vertices per block."""
    cp = import_cupy()
    t = G.transpose()
    deg = cp.diff(G.indptr).astype(np.int32)
    in_deg = cp.diff(t.indptr).get()
    blk, wrp, rdr = pull_static(in_deg, cost)
    static_max = max(int(blk.max() + wrp.max()), 1)
    blk_dev, wrp_dev = cp.asarray(blk, np.uint32), cp.asarray(wrp, np.uint32)
    bptr, bv = (cp.asarray(a) for a in big_lists(in_deg, cost))
    deg_host = deg.get()
    dmax = int(deg_host.max(initial=0))
    return t.indptr, t.indices, deg, deg_host, blk_dev, wrp_dev, rdr, static_max, dmax, bptr, bv
