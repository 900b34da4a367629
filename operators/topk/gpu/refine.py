"""GPU kernels of the refinement at the k-th value (``_topk_refine``, whose text explains it): the band
of the round's list; its vertices' in-edges in chunks spread over the whole GPU; the in-neighbours that
the round did not list, each listed once and estimated as Alg. 6 does; and the band's sums,
each in a fixed order. Launched on the query's stream after its last round (``GPUQuery.refine_launch``).
"""

from __future__ import annotations

import numpy as np

from graphs._device import import_cupy
from operators._gpu.blocks import SCAN_CUDA
from operators._gpu.registry import Kernel
from operators.topk.cpu import tie_order
from operators.topk.gpu.args import LaunchArgs
from operators.topk.gpu.bound import Candidates
from operators.topk.gpu.push import VERTEX_CUDA, VERTEX_DEFINES
from operators.topk.gpu.refine_need import RP_S, NeedBuffers, estimate_need
from operators.topk.refine import band_cap, merge

REFINE_KERNELS = r"""
// the round's list (rp[RP_COUNT] ids, their estimates est): each estimate into dense[t], and the band's
// vertices around the k-th estimate rp[RP_KTH] (of vertex rp[RP_VK]) appended to band (nband counts them,
// past cap too)
extern "C" __global__ void gj_refine_band(const int* ids, const double* rp, const double* est,
        const gj_vertex* vs, const double* pi0, double own, double z, double* dense, int* band, int* nband,
        int cap) {
    const long long count = (long long)rp[RP_COUNT];
    const double rho = rp[RP_RHO], kth = rp[RP_KTH];
    const int vk = (int)rp[RP_VK];
    const double sdk = sqrt(rho * fmax(kth - pi0[vk] - own * vs[vk].r, 0.0));
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < count;
         c += (long long)gridDim.x * blockDim.x) {
        const int t = ids[c];
        const double e = est[c];
        dense[t] = e;
        const double w = fmax(e - pi0[t] - own * vs[t].r, 0.0);
        if (fabs(e - kth) <= z * (sqrt(rho * w) + sdk)) {
            const int j = atomicAdd(nband, 1);
            if (j < cap) band[j] = t;
        }
    }
}
// one block: each band vertex's in-edges in chunks of *chunk edges (32 times the smallest power of two that
// keeps the chunks within REFINE_PARTS); coff[b] = band vertex b's first chunk, coff[nb] = all chunks
extern "C" __global__ void gj_refine_chunks(const int* band, const int* nband, int cap,
        const long long* in_ptr, long long* coff, long long* chunk) {
    const int nb = *nband;
    if (nb > cap) return;
    long long edges = 0, total;
    for (int base = 0; base < nb; base += blockDim.x) {  // block-uniform
        const int b = base + threadIdx.x;
        gj_block_scan(b < nb ? in_ptr[band[b] + 1] - in_ptr[band[b]] : 0, &total);
        edges += total;
    }
    long long per = 32;
    while (edges / per + nb > REFINE_PARTS) per <<= 1;
    long long run = 0;
    for (int base = 0; base < nb; base += blockDim.x) {
        const int b = base + threadIdx.x;
        const long long d = b < nb ? in_ptr[band[b] + 1] - in_ptr[band[b]] : 0;
        const long long first = gj_block_scan((d + per - 1) / per, &total);
        if (b < nb) coff[b] = run + first;
        run += total;
    }
    if (threadIdx.x == 0) { coff[nb] = run; *chunk = per; }
}
// the band vertex of chunk c (the last b with coff[b] <= c) and the chunk's in-edges [*e0, *e1)
__device__ __forceinline__ void gj_refine_chunk(long long c, int nb, const int* band, const long long* coff,
        long long per, const long long* in_ptr, long long* e0, long long* e1) {
    int lo = 0, hi = nb;
    while (hi - lo > 1) { const int mid = (lo + hi) >> 1; if (coff[mid] <= c) lo = mid; else hi = mid; }
    const int t = band[lo];
    *e0 = in_ptr[t] + (c - coff[lo]) * per;
    *e1 = min(*e0 + per, in_ptr[t + 1]);
}
// body(c, e0, e1) for each chunk c of the band's in-edges that this warp takes, [e0, e1) its in-edges
// (nothing for a band above cap)
template <typename Body>
__device__ __forceinline__ void gj_band_chunks(const int* band, const int* nband, int cap,
        const long long* coff, const long long* chunk, const long long* in_ptr, Body body) {
    const int nb = *nband;
    if (nb > cap) return;
    const long long total = coff[nb], per = *chunk;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long c = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < total; c += nwarps) {
        long long e0, e1;
        gj_refine_chunk(c, nb, band, coff, per, in_ptr, &e0, &e1);
        body(c, e0, e1);
    }
}
// a warp per chunk: the in-neighbours that the round did not list, each appended once to need (counted in
// *nneed; mark[u] set until gj_refine_scatter clears it), for _topk_refine_need to estimate
extern "C" __global__ void gj_refine_need(const int* band, const int* nband, int cap, const long long* coff,
        const long long* chunk, const long long* in_ptr, const int* in_idx, const double* pi0,
        const int* h_index, const double* rp, int high_irw, int* mark, int* need, int* nneed) {
    const int lane = threadIdx.x & 31;
    const double tau = rp[RP_TAU];
    gj_band_chunks(band, nband, cap, coff, chunk, in_ptr, [&](long long, long long e0, long long e1) {
        for (long long base = e0; base < e1; base += 32) {  // warp-uniform
            const long long e = base + lane;
            bool first = false;
            int u = 0;
            if (e < e1) {
                u = in_idx[e];
                const bool listed = (high_irw && h_index[u] >= 0) || pi0[u] >= tau;
                first = !listed && mark[u] == 0 && atomicExch(&mark[u], 1) == 0;
            }
            const unsigned got = __ballot_sync(0xffffffffu, first);
            if (got) {  // one append per warp step
                int at = 0;
                if (lane == 0) at = atomicAdd(nneed, __popc(got));
                at = __shfl_sync(0xffffffffu, at, 0);
                if (first) need[at + __popc(got & ((1u << lane) - 1u))] = u;
            }
        }
    });
}
// a warp per chunk: sum over its in-edges (t <- u) of est(u) / d_out(u) into part[c], est(u) from dense[]
// (the round's or _topk_refine_need's); lanes in a fixed order, so that answers do not change between runs
extern "C" __global__ void gj_refine_sum(const int* band, const int* nband, int cap, const long long* coff,
        const long long* chunk, const long long* in_ptr, const int* in_idx, const long long* indptr,
        const double* dense, double* part) {
    const int lane = threadIdx.x & 31;
    gj_band_chunks(band, nband, cap, coff, chunk, in_ptr, [&](long long c, long long e0, long long e1) {
        double acc = 0.0;
        for (long long e = e0 + lane; e < e1; e += 32) {
            const int u = in_idx[e];
            acc += dense[u] / (double)(indptr[u + 1] - indptr[u]);
        }
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0) part[c] = acc;
    });
}
// a block per band vertex: alpha times its chunks' sum (the source rp[RP_S] keeps its own estimate), packed
// for one copy to the host: the band's size, then cap ids, then cap estimates
extern "C" __global__ void gj_refine_reduce(const int* band, const int* nband, int cap, const long long* coff,
        const double* part, const double* dense, double alpha, const double* rp, double* pack) {
    const int nb = *nband, s = (int)rp[RP_S];
    if (blockIdx.x == 0 && threadIdx.x == 0) pack[0] = (double)nb;
    if (nb > cap) return;
    for (int b = blockIdx.x; b < nb; b += gridDim.x) {  // block-uniform
        const int t = band[b];
        double acc = 0.0;
        for (long long c = coff[b] + threadIdx.x; c < coff[b + 1]; c += blockDim.x) acc += part[c];
        acc = gj_block_sum(acc);
        if (threadIdx.x == 0) {
            pack[1 + b] = (double)t;
            pack[1 + cap + b] = t == s ? dense[t] : alpha * acc;
        }
    }
}
"""
REFINE_PARTS = 1 << 18  # partial sums of a band's chunks (the chunks grow to fit)
# the refinement's per-query values in its parameter block (``_Shared.rp``)
RP = dict(RP_COUNT=0, RP_RHO=1, RP_KTH=2, RP_VK=3, RP_TAU=4, RP_S=RP_S)
REFINE_SOURCE = VERTEX_CUDA + SCAN_CUDA + REFINE_KERNELS


REFINE = Kernel(
    REFINE_SOURCE,
    ("gj_refine_band", "gj_refine_chunks", "gj_refine_need", "gj_refine_sum", "gj_refine_reduce"),
    defines={"REFINE_PARTS": REFINE_PARTS, **RP, **VERTEX_DEFINES},
    label="topk-refine",
)


class _Shared:
    """A workspace's refinement buffers for every k: the need list's (``_topk_refine_need.NeedBuffers``),
    the chunks' sums, and the parameter block (device, with its pinned host copy), which the kernels read
    so that the same launches, captured once, serve every query."""

    def __init__(self, index) -> None:
        cp = import_cupy()
        self.need = NeedBuffers(index)
        self.part = cp.empty(REFINE_PARTS, dtype=cp.float64)
        self.rp = cp.zeros(len(RP), dtype=cp.float64)
        mem = cp.cuda.alloc_pinned_memory(self.rp.nbytes)
        self.rp_host = np.frombuffer(mem, dtype=np.float64, count=self.rp.size)
        self.by_cap = {}  # _Band by cap (a captured refinement holds their addresses)


class _Band:
    """The band buffers for a cap: the band, its chunks, and the packed answer (``gj_refine_reduce``) with
    its pinned host copy."""

    def __init__(self, cap: int) -> None:
        cp = import_cupy()
        self.cap = cap
        self.band = cp.empty(cap, dtype=cp.int32)
        self.coff = cp.empty(cap + 1, dtype=cp.int64)
        self.chunk = cp.empty(1, dtype=cp.int64)
        self.pack = cp.empty(1 + 2 * cap, dtype=cp.float64)
        mem = cp.cuda.alloc_pinned_memory(self.pack.nbytes)
        self.host = np.frombuffer(mem, dtype=np.float64, count=self.pack.size)


class Refinement:
    """A workspace's refinement of the last round's answer at the k-th value: its buffers (``shared``,
    made at the first refinement: REFINE_BYTES a vertex that queries with refine=False never take), the
    refinement in flight (``refining``: the round's answer and the band buffers its copy lands in) and
    its kernels' arguments. It reads the query's vertex state and the round's list (``cands``, whose
    ``ids`` and ``est`` past H hold the need list and its estimates once the band kernel has read the
    round's, and whose push's ``big`` holds the long start lists, as in a round)."""

    def __init__(self, index, cands: Candidates, sm_blocks: int) -> None:
        self.index = index
        self.cands = cands
        self.sm_blocks = sm_blocks  # the device's SMs: grids are multiples of it
        self.shared: _Shared | None = None
        self.refining = None
        self.args = LaunchArgs()

    def launch(self, verts, raw, k, ids, offset, listed, s, *, tau, rho, high_irw, edges, z, graphs, rewind):
        """Queue the band of the last round's list (``ids``, H past ``offset``; ``listed`` entries), its
        sums and their copy to the host on the current stream. The per-query values go to the parameter
        block; with ``graphs`` (a ``_topk_gpu_graph.GraphReplay``: in ``topk_ppr``'s queries) the launches
        run as a CUDA graph from the second query of a configuration on (``rewind`` as its ``replay``
        takes): its dozen launches, each costing host time, would otherwise hold up the batch's other
        streams."""
        cap = band_cap(k)
        if self.shared is None:
            self.shared = _Shared(self.index)
        shared = self.shared
        buf = shared.by_cap.get(cap) or shared.by_cap.setdefault(cap, _Band(cap))
        self.refining = (verts, raw, k, buf)
        shared.rp_host[:] = (listed, rho, raw[k - 1], verts[k - 1], tau, s)
        high_irw, z = bool(high_irw), float(z)
        key = ("refine", cap, offset, high_irw, z, edges[0].data.ptr, edges[1].data.ptr)
        launch = lambda: self._kernels(key, lambda: _args(self, ids, buf, high_irw, z, edges))  # noqa: E731
        if graphs is not None:
            graphs.replay(key, launch, rewind)
        else:
            launch()

    def _kernels(self, key, make) -> None:
        """The refinement's copies and launches on the current stream, their arguments made once per
        workspace and configuration ``key`` (by ``make``)."""
        cp = import_cupy()
        copies, (band, chunks, need, sums, reduce) = self.args.get(key, make)
        stream = cp.cuda.get_current_stream().ptr
        runtime = cp.cuda.runtime
        runtime.memcpyAsync(*copies[0], runtime.memcpyHostToDevice, stream)
        runtime.memsetAsync(*copies[1], stream)
        grid = (self.sm_blocks * 4,)
        REFINE.get("gj_refine_band")(grid, (256,), band)
        REFINE.get("gj_refine_chunks")((1,), (256,), chunks)
        REFINE.get("gj_refine_need")(grid, (256,), need)
        estimate_need(self.shared.need, self.cands, self.shared.rp, self.sm_blocks)
        REFINE.get("gj_refine_sum")(grid, (256,), sums)
        REFINE.get("gj_refine_reduce")(grid, (256,), reduce)
        runtime.memcpyAsync(*copies[2], runtime.memcpyDeviceToHost, stream)

    def read(self):
        """(vertices, raw estimates, band size) once ``launch``'s copies have arrived."""
        verts, raw, k, buf = self.refining
        cap = buf.cap
        nb = int(buf.host[0])
        if nb == 0 or nb > cap:
            return verts, raw, 0
        band = buf.host[1 : 1 + nb].astype(np.int64)
        v, e = merge(verts, raw, band, buf.host[1 + cap : 1 + cap + nb].copy(), k, tie_order(self.index)[0])
        return v, e, nb

    def close(self) -> None:
        """Drop the buffers (and the kernel arguments that hold them)."""
        self.args.close()
        self.shared = self.refining = None


def _args(r: Refinement, ids, buf, high_irw, z, edges):
    """(copies, kernel arguments) of ``Refinement._kernels``."""
    c = r.cands
    p = c.push
    a, P = r.index.arrays, r.index.params
    shared = r.shared
    nb = shared.need
    rp = shared.rp
    copies = (
        (rp.data.ptr, shared.rp_host.ctypes.data, rp.nbytes),
        (nb.counts.data.ptr, 0, nb.counts.nbytes),
        (buf.host.ctypes.data, buf.pack.data.ptr, buf.pack.nbytes),
    )
    head = (buf.band, nb.nband, np.int32(buf.cap), buf.coff)
    chunks = (*head, buf.chunk, *edges)
    own = np.float64(P.own_share)
    return copies, (
        (ids, rp, c.est, p.state, p.pi0, own, np.float64(z), p.bigval, buf.band, nb.nband, np.int32(buf.cap)),
        (*head[:3], edges[0], buf.coff, buf.chunk),
        (*chunks, p.pi0, a["h_index"], rp, np.int32(high_irw), nb.mark, c.ids[c.nh :], nb.nneed),
        (*chunks, r.index.graph.indptr, p.bigval, shared.part),
        (*head, shared.part, p.bigval, np.float64(P.alpha), rp, buf.pack),
    )
