"""GPU kernels of the refinement at the k-th value (``_topk_refine``, whose text explains it): the band
of the round's list; its vertices' in-edges in chunks spread over the whole GPU; the in-neighbours that
the round did not list, each listed once and estimated as Alg. 6 does; and the band's sums,
each in a fixed order. Launched on the query's stream after its last round (``GPUQuery.refine_launch``).
"""

from __future__ import annotations

import numpy as np

from graphs._device import get_kernel, import_cupy

from ._cuda_blocks import SCAN_CUDA
from ._topk_cpu import tie_order
from ._topk_gpu_push import VERTEX_CUDA
from ._topk_refine import REFINE_Z, band_cap, merge
from ._topk_refine_need import NeedBuffers, estimate_need

REFINE_KERNELS = r"""
// the round's list (count ids, their estimates est): each estimate into dense[t], and the band's vertices
// appended to band (nband counts them, past cap too)
extern "C" __global__ void gj_refine_band(const int* ids, long long count, const double* est,
        const gj_vertex* vs, const double* pi0, double own, double rho, double kth, int vk, double z,
        double* dense, int* band, int* nband, int cap) {
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
        const int* h_index, double tau, int high_irw, int* mark, int* need, int* nneed) {
    const int lane = threadIdx.x & 31;
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
// a block per band vertex: alpha times its chunks' sum (the source keeps its own estimate), packed for one
// copy to the host: the band's size, then cap ids, then cap estimates
extern "C" __global__ void gj_refine_reduce(const int* band, const int* nband, int cap, const long long* coff,
        const double* part, const double* dense, double alpha, int s, double* pack) {
    const int nb = *nband;
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
REFINE_SOURCE = f"#define REFINE_PARTS {REFINE_PARTS}\n" + VERTEX_CUDA + SCAN_CUDA + REFINE_KERNELS


class _Buffers:
    """A workspace's band buffers for caps up to ``cap``: the band, its chunks and their sums on the device,
    the need list's (``_topk_refine_need.NeedBuffers``), and the packed answer (``gj_refine_reduce``) with
    its pinned host copy."""

    def __init__(self, cap: int, q):
        cp = import_cupy()
        self.cap = cap
        self.need = NeedBuffers(q)
        self.band = cp.empty(cap, dtype=cp.int32)
        self.coff = cp.empty(cap + 1, dtype=cp.int64)
        self.chunk = cp.empty(1, dtype=cp.int64)
        self.part = cp.empty(REFINE_PARTS, dtype=cp.float64)
        self.pack = cp.empty(1 + 2 * cap, dtype=cp.float64)
        mem = cp.cuda.alloc_pinned_memory(self.pack.nbytes)
        self.host = np.frombuffer(mem, dtype=np.float64, count=self.pack.size)


def refine_launch_gpu(q, verts, raw, k, *, tau, rho, high_irw, edges, z=REFINE_Z):
    """Queue the band of the last round's list, its sums and their copy to the host on the current
    stream (``q``: GPUQuery; ``GPUQuery.refine_launch``). Once the band kernel has read the round's list
    and estimates, their buffers (``q.ids``, ``q.est`` past H) hold the need list and its estimates, and
    ``q.big`` the long start lists, as in a round."""
    cp = import_cupy()
    ids, offset, _ = q.round
    count = offset + int(q.record[0])  # H and the candidates (the round's record holds their count)
    cap = band_cap(k)
    q.refining = (verts, raw, k, cap)
    buf = q.__dict__.get("refine_buffers")
    if buf is None or buf.cap < cap:
        buf = q.refine_buffers = _Buffers(cap, q)
    a, P = q.index.arrays, q.index.params
    own = float(P.own_share)
    nb = buf.need
    stream = cp.cuda.get_current_stream().ptr
    cp.cuda.runtime.memsetAsync(nb.counts.data.ptr, 0, nb.counts.nbytes, stream)
    grid = (q.sm_blocks * 4,)
    get_kernel(REFINE_SOURCE, "gj_refine_band")(grid, (256,), (
        ids, np.int64(count), q.est, q.state, q.pi0, np.float64(own), np.float64(rho),
        np.float64(raw[k - 1]), np.int32(verts[k - 1]), np.float64(z), q.bigval, buf.band, nb.nband,
        np.int32(cap),
    ))  # fmt: skip
    head = (buf.band, nb.nband, np.int32(cap), buf.coff)
    get_kernel(REFINE_SOURCE, "gj_refine_chunks")((1,), (256,), (*head[:3], edges[0], buf.coff, buf.chunk))
    chunks = (*head, buf.chunk, *edges)
    need, got = q.ids[q.nh :], q.est[q.nh :]
    get_kernel(REFINE_SOURCE, "gj_refine_need")(grid, (256,), (
        *chunks, q.pi0, a["h_index"], np.float64(tau), np.int32(bool(high_irw)), nb.mark, need, nb.nneed,
    ))  # fmt: skip
    estimate_need(q, nb, need, got, own)
    sums = (*chunks, q.index.graph.indptr, q.bigval, buf.part)
    get_kernel(REFINE_SOURCE, "gj_refine_sum")(grid, (256,), sums)
    get_kernel(REFINE_SOURCE, "gj_refine_reduce")(grid, (256,), (
        *head, buf.part, q.bigval, np.float64(P.alpha), np.int32(q.s), buf.pack,
    ))  # fmt: skip
    cp.cuda.runtime.memcpyAsync(
        buf.host.ctypes.data, buf.pack.data.ptr, 8 * (1 + 2 * cap), cp.cuda.runtime.memcpyDeviceToHost, stream
    )  # fmt: skip
    q.done.record()


def refine_read_gpu(q):
    """(vertices, raw estimates, band size) once ``refine_launch_gpu``'s copies have arrived
    (``GPUQuery.refine_finish``)."""
    q.done.synchronize()
    verts, raw, k, cap = q.refining
    buf = q.refine_buffers
    nb = int(buf.host[0])
    if nb == 0 or nb > cap:
        return verts, raw, 0
    band = buf.host[1 : 1 + nb].astype(np.int64)
    v, e = merge(verts, raw, band, buf.host[1 + cap : 1 + cap + nb].copy(), k, tie_order(q.index)[0])
    return v, e, nb
