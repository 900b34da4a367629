"""Propagation-blocked ("binned") PageRank: the edge layout, and the CPU iteration over it.

The pull iteration gathers ``c[u] = x[u] / outweight[u]`` at random along every in-edge; once ``c`` no
longer fits in the GPU's L2, those 4-byte gathers each cost a 32-byte L2 sector and bound the kernel.
The binned iteration replaces them with two streaming passes over a fixed edge layout:

- the vertices are cut into *chunks* of ``2**chunk_bits`` sources and *bins* of ``2**bin_bits``
  destinations; edge ``u -> v`` belongs to segment ``(chunk(u), bin(v))``; segments are stored chunk
  after chunk, bins in order inside a chunk, each segment sorted by destination and padded to a
  multiple of ``VEC`` edges (padding: destination ``PAD``);
- per edge the layout keeps the source's offset in its chunk and the destination's offset in its bin
  (16 bits each), and the weight for weighted graphs;
- *fill*: per chunk, ``c`` of its sources is read once (on the GPU into shared memory) and every edge
  of the chunk writes its contribution into ``val`` (same order as the layout: a sequential stream);
- *sum*: per bin, the contributions of its segments (one per chunk) are added into the bin's rows (on
  the GPU in shared memory), then each row finishes as in ``pull``.

Per edge that moves 2 + 4 bytes in fill and 4 + 2 in sum (plus 4 + 4 weighted), all sequential.
A graph not in degree order is laid out over its ids renumbered by degree (``binned_order``): the sum
pass then merges the hubs' runs instead of paying a conflicting shared atomic for each of their edges.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from graphs._build import expand_rows
from graphs._device import array_module
from graphs.reorder import order_permutation
from operators.pagerank.order import back, into
from operators.pagerank.parts import finish_rows_cpu

VEC = 8  # edges per vector: segments are padded to a multiple of it
PAD = 0xFFFF  # destination offset of a padding slot
# chunk and bin sizes by value size (shared memory: 128 KB of chunk values per fill block, bins of 32 KB
# so three sum blocks of 512 threads share an SM; four would spill), and edges per fill / sum work item;
# tuned on the benchmark graphs (benchmarks/RESULTS.md, PageRank section)
TUNING = {
    4: {"chunk_bits": 15, "bin_bits": 13},
    8: {"chunk_bits": 14, "bin_bits": 12},
    "fill_edges": 262_144,
    "sum_edges": 262_144,
    "min_item_edges": 16_384,
    "max_chunks": 4096,
    "sum_blocks": {4: 3, 8: 2},
    "fill_unroll": 1,
    "sum_fixed": True,
    "hot_vertices": 32_768,
    "order_below": 0.2,
}


def build_bytes(m: int, weighted: bool) -> int:
    """Device bytes to build the layout of ``m`` edges, an upper bound with room to spare: the GPU's
    kernel build keeps only the keys, the sort's buffer and int32 rows (about 24 bytes an edge)."""
    return (56 if weighted else 48) * m


def binned_layout(
    indptr_t,
    indices_t,
    weights_t,
    n: int,
    *,
    chunk_bits: int,
    bin_bits: int,
    fill_edges: int | None = None,
    sum_edges: int | None = None,
    rank=None,
    rows: int | None = None,
) -> dict:
    """The binned layout of the in-edges ``indptr_t, indices_t`` (the transposed CSR), on their device.

    Sources are ids below ``n``; destinations are the rows of ``indptr_t``, ``rows`` of them (default
    ``n``; fewer for one part of a partitioned graph, whose rows are its own vertices from 0).

    Returns the per-edge arrays ``src`` and ``dst`` (uint16 offsets in chunk and bin), ``w`` (float32
    weights in layout order, or None), the segment table ``pre`` / ``segv`` (per bin: prefix counts and
    starts of its segments, in vectors), and the work items of the two passes (``fill_*``, ``sum_*``).
    With ``rank`` (int64, new id of every vertex) the layout is over the renumbered vertices.
    """
    if not (1 <= chunk_bits <= 16 and 1 <= bin_bits <= 15):
        raise ValueError(f"chunk_bits must be in 1..16 and bin_bits in 1..15, got {chunk_bits}, {bin_bits}")
    xp = array_module(indices_t)
    m = int(indices_t.shape[0])
    rows = n if rows is None else rows
    if int(indptr_t.shape[0]) != rows + 1:
        raise ValueError(f"indptr_t has {int(indptr_t.shape[0]) - 1} rows, expected {rows}")
    if rank is not None and rows != n:
        raise ValueError("rank= renumbers sources and destinations alike: it needs rows == n")
    nc, nb_ = -(-n // (1 << chunk_bits)), -(-rows // (1 << bin_bits))
    cmask, bmask = (1 << chunk_bits) - 1, (1 << bin_bits) - 1
    bits = (chunk_bits, bin_bits)
    if xp is np:
        key = _keys_host(indptr_t, indices_t, rank, nb_, *bits)
    else:  # one kernel from the int32 rows: no 8-byte temporaries of m (they cost time in cudaMalloc too)
        from operators.pagerank.binned.build import edge_keys

        key = edge_keys(indptr_t, indices_t, rank, nb_, *bits)
    order = None
    if weights_t is not None:
        order = xp.argsort(key)
        key = key[order]
    else:
        key.sort()
    ustart = xp.searchsorted(key, xp.arange(nc * nb_ + 1, dtype=xp.int64) << (chunk_bits + bin_bits))
    padded = -(-xp.diff(ustart) // VEC) * VEC
    seg_off = xp.zeros(nc * nb_ + 1, dtype=xp.int64)
    xp.cumsum(padded, out=seg_off[1:])
    shift = seg_off[:-1] - ustart[:-1]  # where each segment's edges move to
    total = int(seg_off[-1])
    if total // VEC >= 2**31:
        raise ValueError(f"{m:,} edges are beyond the binned layout (fewer than {2**34:,} are supported)")
    out = {"src": xp.zeros(total, dtype=xp.uint16), "dst": xp.full(total, PAD, dtype=xp.uint16), "w": None}
    if weights_t is not None:
        out["w"] = xp.zeros(total, dtype=xp.float32)
    if xp is np:
        pos = shift[key >> (chunk_bits + bin_bits)] + np.arange(m, dtype=np.int64)
        out["src"][pos] = (key & cmask).astype(np.uint16)
        out["dst"][pos] = ((key >> chunk_bits) & bmask).astype(np.uint16)
        if weights_t is not None:
            out["w"][pos] = weights_t[order]
        del pos
    else:
        from operators.pagerank.binned.build import place_edges

        place_edges(key, shift, *bits, out, weights_t, order)
    del key, order
    so = np.asarray(seg_off.get() if xp is not np else seg_off) // VEC  # in vectors, on the host
    nv = np.diff(so).reshape(nc, nb_)
    pre = np.zeros((nb_, nc + 1), dtype=np.int64)
    np.cumsum(nv.T, axis=1, out=pre[:, 1:])
    segv = so[:-1].reshape(nc, nb_).T
    # items of TUNING's size, smaller on graphs with fewer edges so that a pass still fills the GPU
    fill_edges = fill_edges or min(TUNING["fill_edges"], max(TUNING["min_item_edges"], m // 1024))
    sum_edges = sum_edges or min(TUNING["sum_edges"], max(TUNING["min_item_edges"], m // 1024))
    fill = _items(so[::nb_], max(1, fill_edges // VEC), at_least_one=False)
    summ = _items(np.concatenate([[0], np.cumsum(pre[:, -1])]), max(1, sum_edges // VEC))
    host = {
        "pre": pre.astype(np.int32),
        "segv": np.ascontiguousarray(segv, dtype=np.int32),
        "fill_group": fill[0],
        "fill_lo": fill[1],
        "fill_hi": fill[2],
        "sum_group": summ[0],
        "sum_lo": (summ[1] - summ[3]).astype(np.int32),
        "sum_hi": (summ[2] - summ[3]).astype(np.int32),
        "sum_count": np.bincount(summ[0], minlength=nb_).astype(np.int32),
    }
    out |= {k: xp.asarray(v) for k, v in host.items()}
    return out | {
        "n": n,
        "rows": rows,
        "chunks": nc,
        "bins": nb_,
        "chunk_bits": chunk_bits,
        "bin_bits": bin_bits,
        "m_pad": total,
    }


def _keys_host(indptr_t, indices_t, rank, nbins: int, chunk_bits: int, bin_bits: int) -> np.ndarray:
    """Sort key of every in-edge: (segment, destination offset in its bin, source offset in its chunk)."""
    src = indices_t.astype(np.int64) if rank is None else rank[indices_t]
    dst = expand_rows(indptr_t, indices_t.shape[0]).astype(np.int64)
    dst = dst if rank is None else rank[dst]
    seg = (src >> chunk_bits) * nbins + (dst >> bin_bits)
    return (
        (seg << (chunk_bits + bin_bits))
        | ((dst & ((1 << bin_bits) - 1)) << chunk_bits)
        | (src & ((1 << chunk_bits) - 1))
    )


def _items(bounds, size: int, *, at_least_one: bool = True):
    """Work items of at most ``size`` vectors over the groups ``[bounds[g], bounds[g+1])``: arrays of
    group, start, end and the group's start; an empty group gets one empty item if ``at_least_one``."""
    bounds = np.asarray(bounds, dtype=np.int64)
    length = np.diff(bounds)
    k = -(-length // size)
    if at_least_one:
        k = np.maximum(k, 1)
    group = np.repeat(np.arange(length.size, dtype=np.int32), k)
    first = np.repeat(np.cumsum(k) - k, k)
    lo = np.repeat(bounds[:-1], k) + (np.arange(group.size) - first) * size
    hi = np.minimum(lo + size, np.repeat(bounds[1:], k))
    return group, lo, hi, np.repeat(bounds[:-1], k)


@nb.njit(parallel=True, cache=True)
def _fill_cpu(src, w, weighted, c, chunk_lo, chunk_bits, val):
    for ch in nb.prange(chunk_lo.size - 1):
        base = ch << chunk_bits
        for e in range(chunk_lo[ch] * 8, chunk_lo[ch + 1] * 8):
            val[e] = c[base + src[e]] * w[e] if weighted else c[base + src[e]]


@nb.njit(parallel=True, cache=True)
def _sum_cpu(dst, val, pre, segv, bin_bits, y):
    for b in nb.prange(pre.shape[0]):  # pre, segv: the layout's int32 tables, widened here per segment
        base = b << bin_bits
        for k in range(pre.shape[1] - 1):
            lo = np.int64(segv[b, k]) * 8
            for e in range(lo, lo + np.int64(pre[b, k + 1] - pre[b, k]) * 8):
                if dst[e] != 0xFFFF:
                    y[base + dst[e]] += val[e]


@nb.njit(cache=True)
def _binned_cpu(
    src,
    dst,
    w,
    weighted,
    chunk_lo,
    pre,
    segv,
    chunk_bits,
    bin_bits,
    inv_out,
    x,
    p,
    dw,
    alpha,
    max_iter,
    threshold,
):
    val = np.empty(src.size)
    y = np.empty(x.size)
    c = x * inv_out
    dsum = np.sum(np.where(inv_out == 0.0, x, 0.0))
    err = np.inf
    for it in range(max_iter):
        _fill_cpu(src, w, weighted, c, chunk_lo, chunk_bits, val)
        y[:] = 0.0
        _sum_cpu(dst, val, pre, segv, bin_bits, y)
        x, c, err, dsum = finish_rows_cpu(y, 0, inv_out, x, p, dw, dsum, alpha)
        if err < threshold:
            return x, it + 1, err
    return x, max_iter, err


def binned_sums_cpu(lay, c, weighted: bool):
    """One binned pass on the host: ``y[r] = sum of c[u] (times the weight) over the in-edges u -> r`` of
    each of the layout's ``rows`` destinations, from the vector ``c`` over its ``n`` sources."""
    w = lay["w"] if weighted else np.empty(0, dtype=np.float32)
    val = np.empty(lay["m_pad"])
    _fill_cpu(
        lay["src"], w, weighted, np.asarray(c, dtype=np.float64), chunk_starts(lay), lay["chunk_bits"], val
    )
    y = np.zeros(lay["rows"])
    _sum_cpu(lay["dst"], val, lay["pre"], lay["segv"], lay["bin_bits"], y)
    return y


def binned_cpu(G, weighted, inv_out, x, p, dw, alpha, max_iter, threshold):
    """PageRank on the CPU by the binned iteration (float64): ``(x, iterations, last L1 change)``."""
    bits = TUNING[8]
    perm = binned_order(G)
    lay = kept_layout(G, weighted, bits, perm)
    w = lay["w"] if weighted else np.empty(0, dtype=np.float32)
    if perm is not None:  # iterate over the renumbered ids
        inv_out, x, p, dw = (into(v, perm) for v in (inv_out, x, p, dw))
    x, iters, err = _binned_cpu(
        lay["src"],
        lay["dst"],
        w,
        weighted,
        chunk_starts(lay),
        lay["pre"],
        lay["segv"],
        bits["chunk_bits"],
        bits["bin_bits"],
        inv_out,
        x,
        p,
        dw,
        alpha,
        max_iter,
        threshold,
    )
    return (x if perm is None else back(x, perm)), iters, err


def chunk_starts(lay) -> np.ndarray:
    """Where each chunk's edges start in the layout, in vectors (and the end): host int64."""
    first = np.asarray(lay["segv"][0].get() if hasattr(lay["segv"], "get") else lay["segv"][0])
    return np.append(first, lay["m_pad"] // VEC).astype(np.int64)


def hot_share(G, vertices: int | None = None) -> float:
    """Share of ``G``'s edges leaving its first ``vertices`` ids (default: as many as pull caches)."""
    vertices = TUNING["hot_vertices"] if vertices is None else vertices
    return int(G.indptr[min(G.n, vertices)]) / G.m if G.m else 1.0


def binned_order(G, *, keep: bool = True):
    """``perm`` (new vertex i is old vertex perm[i]) by decreasing degree when ``G`` is not in such an
    order already (its first ids hold under ``order_below`` of the edges), else None; kept with ``G``
    unless ``keep`` is False.
    The layout is then built over the renumbered ids: its hubs' runs merge in the sum pass, with no copy
    of the graph, only this permutation."""
    if hot_share(G) >= TUNING["order_below"]:
        return None
    build = lambda g: order_permutation(g).astype(np.int64, copy=False)  # noqa: E731
    return G.derived("pagerank_binned_order", build) if keep else build(G)


def _layout_key(weighted: bool, bits: dict) -> str:
    return f"pagerank_binned_{bool(weighted)}_{bits['chunk_bits']}_{bits['bin_bits']}"


def kept_layout(G, weighted: bool, bits: dict, perm=None) -> dict:
    """``binned_layout_of(G)`` for chunk and bin ``bits`` (renumbered by ``perm``), kept with ``G``."""
    return G.derived(
        _layout_key(weighted, bits) + ("_ordered" if perm is not None else ""),
        lambda g: binned_layout_of(g, weighted, **bits, perm=perm),
    )


def kept_run_bytes(G, weighted: bool, dtype) -> int | None:
    """Where ``G`` keeps the layout that ``dtype``'s binned iteration runs on (no build left to do), the
    device bytes a run of it allocates beside it (``layout_step``: a value per padded edge, a row sum per
    destination, a counter per bin); None where no such layout is kept."""
    dtype = np.dtype(dtype)
    key = _layout_key(weighted, TUNING[dtype.itemsize])
    for name in (key, key + "_ordered"):
        lay = G.derived(name, lambda g: None) if G.has_derived(name) else None
        if lay is not None:  # (None: forgotten in between, by another thread)
            return dtype.itemsize * (int(lay["m_pad"]) + int(lay["rows"])) + 4 * int(lay["bins"])
    return None


def binned_layout_of(G, weighted: bool, *, chunk_bits: int, bin_bits: int, perm=None) -> dict:
    """``binned_layout`` of ``G``'s in-edges (built from its cached transpose), renumbered by ``perm``."""
    T = G.transpose()
    rank = None
    if perm is not None:
        rank = array_module(perm).empty_like(perm)
        rank[perm] = array_module(perm).arange(perm.size, dtype=perm.dtype)
    return binned_layout(
        T.indptr,
        T.indices,
        T.weights if weighted else None,
        G.n,
        chunk_bits=chunk_bits,
        bin_bits=bin_bits,
        rank=rank,
    )
