"""Exact top k of a source whose walks can reach only a few vertices.

After a push, the touched set T holds every vertex that has received mass. When each vertex of T has
been pushed at least once (its reserve is positive), each has sent mass along all its out-edges, so T
is closed under out-edges (a dangling vertex's share returns to s, in T): T is exactly the set of
vertices reachable from s, and pi(s, t) = 0 for t outside T. Then the PPR of T solves the |T| x |T|
system (I - alpha M) x = (1 - alpha) e_s, with M[v, u] the share of u's walks that step to v (edge
multiplicity over d_out(u); a dangling u steps to s), exactly, where Algorithm 3 would fail every
round for want of k estimates and end in the Monte-Carlo fallback. (On soc-Slashdot0902, 6,550 of
the 78,441 vertices with out-edges have only a self-loop.)

A source whose walks never leave it (no out-edge, or self-loops only) is the smallest case (T = {s},
pi(s, s) = 1), and a common one: about half of an R-MAT graph's vertices have no out-edge, so half of a
batch of uniformly random sources. ``lone_sources`` finds them (in bits kept with the graph, n / 8
bytes on the host, so that a call of one source does no device work before its rounds) and
``lone_topk`` answers them without any round, as the solve would. ``small_reaches`` finds the other
sources of small closed reach before any round too (6.5% of soc-Epinions1's sources with out-edges),
by a bounded search over a host copy of the graph, kept with it up to PROBE_EDGES edges.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from graphs._device import array_module, import_cupy, to_host
from operators._gpu.registry import Kernel
from operators._ranked import PAD_VERTEX
from operators.topk.cpu import select_top

EXACT_REACH = 256  # largest closed touched set solved densely (the solve costs O(|T|^3))


def closed_reach_topk(G, reach, s: int, alpha: float, k: int, order=(None, None)):
    """Vertices (internal ids) and PPR of the top k from ``s`` when ``reach`` (host ids, every touched
    vertex, each pushed at least once) is closed under out-edges; None when it is not. ``order``:
    ``tie_order`` of the index, whose ids rank ties. With |T| < k the slots after T hold PAD_VERTEX and 0."""
    t = np.sort(np.asarray(reach, dtype=np.int64))
    nt = t.size
    xp = array_module(G.indptr)
    rows = xp.asarray(t)
    lo, hi = to_host(G.indptr[rows]), to_host(G.indptr[rows + 1])
    deg = hi - lo
    first = np.cumsum(deg) - deg  # each row's first position in the gathered edge list
    pos = np.repeat(lo - first, deg) + np.arange(int(deg.sum()))
    dst = to_host(G.indices[xp.asarray(pos)]).astype(np.int64)
    dst_local = np.minimum(np.searchsorted(t, dst), nt - 1)
    if not np.array_equal(t[dst_local], dst):  # an out-edge leaves T: not closed
        return None
    src_local = np.repeat(np.arange(nt), deg)
    m = np.zeros((nt, nt))
    np.add.at(m, (dst_local, src_local), 1.0 / deg[src_local])
    s_local = int(np.searchsorted(t, s))
    m[s_local, deg == 0] += 1.0
    rhs = np.zeros(nt)
    rhs[s_local] = 1.0 - alpha
    x = np.maximum(np.linalg.solve(np.eye(nt) - alpha * m, rhs), 0.0)
    best = select_top(t, x, min(k, nt), order[0])
    verts, vals = t[best], x[best]
    if nt < k:  # no vertex outside T has PPR > 0: the slots after T are padding
        verts = np.concatenate([verts, np.full(k - nt, PAD_VERTEX, dtype=np.int64)])
        vals = np.concatenate([vals, np.zeros(k - nt)])
    return verts, vals


def lone_sources(G, src: np.ndarray) -> np.ndarray:
    """Which of ``src`` (internal ids, host) have no out-edge to another vertex: a lookup in the graph's
    ``lone_vertices`` bits, so that a call of one source does no device work for it."""
    bits = G.derived("topk_lone_vertices", lone_vertices)
    return ((bits[src >> 3] >> (src & 7).astype(np.uint8)) & 1).astype(bool)


def lone_vertices(G) -> np.ndarray:
    """Bit v (little-endian within each byte) set when vertex v has no out-edge to another vertex (none, or
    self-loops only), on the host: n / 8 bytes kept with the graph, computed once on its device."""
    if G.device == "gpu":
        lone = _lone_gpu(G)
    else:
        lone = np.empty(G.n, dtype=np.uint8)
        _lone_cpu(G.indptr, G.indices, lone)
    return np.packbits(lone, bitorder="little")


@nb.njit(cache=True)
def _lone_cpu(indptr, indices, lone):
    for v in range(lone.size):
        lone[v] = 1
        for e in range(indptr[v], indptr[v + 1]):
            if indices[e] != v:
                lone[v] = 0
                break


LONE_CUDA = r"""
// lone[v] = 1 when every out-edge of v is a self-loop (or it has none); a thread per vertex, which stops
// at its first edge to another vertex
extern "C" __global__ void gj_lone_vertices(const long long* indptr, const IDX* indices, long long n,
        unsigned char* lone) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += step) {
        unsigned char own = 1;
        for (long long e = indptr[v], end = indptr[v + 1]; e < end; ++e) {
            if ((long long)indices[e] != v) { own = 0; break; }
        }
        lone[v] = own;
    }
}
"""


# IDX: the graph's index type
LONE = Kernel(
    LONE_CUDA, ("gj_lone_vertices",), variants=({"IDX": "int"}, {"IDX": "long long"}), label="topk-lone"
)


def _lone_gpu(G) -> np.ndarray:
    cp = import_cupy()
    kernel = LONE.get("gj_lone_vertices", IDX="long long" if G.indices.dtype == np.int64 else "int")
    lone = cp.empty(G.n, dtype=cp.uint8)
    kernel((max(1, min(4096, (G.n + 255) // 256)),), (256,), (G.indptr, G.indices, np.int64(G.n), lone))
    return lone.get()


def lone_topk(sources: np.ndarray, k: int, n: int):
    """Top k (internal ids, PPR) of lone sources, rows following ``sources``: the source (PPR 1), then
    padding (PAD_VERTEX, 0), as ``closed_reach_topk`` answers them."""
    s = np.asarray(sources, dtype=np.int64)
    verts = np.full((s.size, min(k, n)), PAD_VERTEX, dtype=np.int64)
    vals = np.zeros(verts.shape)
    verts[:, 0], vals[:, 0] = s, 1.0
    return verts, vals


PROBE_EDGES = 1 << 25  # a GPU graph up to this many edges keeps a host copy for ``small_reaches``: on
# larger graphs small reaches are rare and the host search costs more than they save
PROBE_SCAN = 1 << 16  # out-edges one source's search reads at most before it gives up


def small_reaches(G, src: np.ndarray, todo: np.ndarray) -> dict:
    """({i: the vertices reachable from src[i]}, the graph on the host) for the sources ``todo``
    (positions in ``src``) that reach at most EXACT_REACH vertices, each found by a search that reads at
    most PROBE_SCAN out-edges; ``closed_reach_topk`` takes that graph. ({}, None) without a host copy."""
    host = probe_graph(G)
    if host is None or not todo.size:
        return {}, host
    out = np.empty((todo.size, EXACT_REACH), dtype=np.int64)
    count = np.empty(todo.size, dtype=np.int64)
    _probe(host.indptr, host.indices, src[todo].astype(np.int64), PROBE_SCAN, out, count)
    return {int(todo[j]): out[j, : count[j]] for j in np.flatnonzero(count > 0)}, host


def probe_graph(G):
    """The graph on the host for ``small_reaches``: itself on the CPU, a copy kept with a GPU graph of
    at most PROBE_EDGES edges (``G.forget_derived('topk_host_copy')`` frees it), else None."""
    if G.device == "cpu":
        return G
    if G.m > PROBE_EDGES:
        return None
    return G.derived("topk_host_copy", lambda g: g.to("cpu"))


@nb.njit(cache=True)
def _probe(indptr, indices, sources, scan, out, count):
    """Breadth-first from each source, over at most out.shape[1] vertices and ``scan`` out-edges:
    count[j] = the reach of sources[j], listed in out[j], or -1 when larger (or the scan ran out).
    The vertices seen sit in an open-addressing table of twice the limit (no O(n) state per call)."""
    limit = out.shape[1]
    size = 1
    while size < 2 * limit:
        size *= 2
    table = np.empty(size, dtype=np.int64)
    for j in range(sources.size):
        table[:] = -1
        s = sources[j]
        table[(s * 0x9E3779B1) & (size - 1)] = s
        out[j, 0] = s
        c, head, read, ok = 1, 0, 0, True
        while ok and head < c:
            u = out[j, head]
            head += 1
            read += indptr[u + 1] - indptr[u]
            if read > scan:
                ok = False
                break
            for e in range(indptr[u], indptr[u + 1]):
                v = np.int64(indices[e])
                h = (v * 0x9E3779B1) & (size - 1)
                while table[h] != -1 and table[h] != v:
                    h = (h + 1) & (size - 1)
                if table[h] == -1:
                    if c == limit:
                        ok = False
                        break
                    table[h] = v
                    out[j, c] = v
                    c += 1
        count[j] = c if ok else -1


def without_rounds(G, src, k, alpha, out, delta_init, order) -> np.ndarray:
    """Answer the sources of small closed reach before any round (``_topk_exact``): the lone ones, then
    those ``small_reaches`` finds; returns which are done. Every source's seconds start with an equal
    share of finding them; those answered here add their own solve."""
    t0 = time.perf_counter()
    done = lone_sources(G, src)
    if done.any():  # pi(s, s) = 1
        at = np.flatnonzero(done)
        out.vertices[at], out.ppr[at] = lone_topk(src[at], k, G.n)
        out.exact[at], out.delta[at] = True, delta_init
    reaches, host = small_reaches(G, src, np.flatnonzero(~done))
    out.seconds[:] = (time.perf_counter() - t0) / max(src.size, 1)
    for i, reach in reaches.items():
        t1 = time.perf_counter()
        exact = closed_reach_topk(host, reach, int(src[i]), alpha, k, order)
        if exact is not None:  # always: the search listed everything reachable
            out.vertices[i], out.ppr[i] = exact
            out.exact[i], out.delta[i], done[i] = True, delta_init, True
            out.seconds[i] += time.perf_counter() - t1
    return done
