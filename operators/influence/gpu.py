"""CUDA kernels of influence maximization (gIM): one warp per RR sample or cascade (the greedy is in
``_im_greedy_gpu``).

The same live-edge worlds as ``_im_cpu`` (keyed by sample, round and edge or vertex), so the GPU
produces the very sets the CPU does. A persistent grid of warps takes samples from an atomic
counter; each warp runs a warp-cooperative BFS (up to 32 queued vertices at a time, their edges
spread over the lanes by a prefix scan), marks visited vertices in its own bitmap, queues them in its
own scratch area, then reserves room in one shared pool with a single atomicAdd and copies the
sample there. A sample too large for the scratch area, or for the pool, is marked and done again in a
second pass with room to spare; the samples are finally gathered in sample order.
"""

from __future__ import annotations

import numpy as np

from graphs._device import free_memory, import_cupy
from operators._gpu.device import sm_count
from operators._gpu.registry import Kernel
from operators.influence.greedy import cover, cover_index, greedy  # noqa: F401  (the backend interface of _im_cpu)
from operators.influence.kernels import FIRST_MEAN, IM_DEFINES, IM_DEVICE

_SCRATCH = 1 << 13  # first-pass queue capacity per warp (elements)
_BUDGET = 4 << 30  # bytes of bitmaps and queues for all warps together
REDO_SHARE = 16  # the pool of the pass that redoes samples outgrowing their queue: 1/16 of the free bytes


def _free_bytes() -> int:
    """Device memory free to allocate (``free_memory``: the driver's free memory plus what CuPy's pool
    holds unused, within ``$GRAPHJOBS_MEMORY_LIMIT``), as the memory estimate reads it."""
    return free_memory("gpu")


def _grid(per_warp_bytes: int, want_warps: int):
    sms = sm_count()
    budget = min(_BUDGET, _free_bytes() // 4)
    warps = int(max(8, min(sms * 64, want_warps, budget // max(per_warp_bytes, 1))))
    warps = -(-warps // 8) * 8
    return warps, (warps // 8,), (256,)


SAMPLE_KERNEL = (
    IM_DEVICE
    + r"""
extern "C" __global__ void gj_im_sample(GJ_IM_SAMPLE_ARGS) {
    gj_im_sample_group(GjWarp(), GJ_IM_SAMPLE_PASS);
}

extern "C" __global__ void __launch_bounds__(512) gj_im_sample_block(GJ_IM_SAMPLE_ARGS) {
    __shared__ long long s[3 * GjBlock::W + 2];
    gj_im_sample_group(GjBlock{s}, GJ_IM_SAMPLE_PASS);
}

extern "C" __global__ void gj_im_gather(const int* pool, const long long* start, const int* size,
        const long long* dest, long long count, int* out) {
    int lane = threadIdx.x & 31;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < count; w += warps)
        for (long long i = lane; i < size[w]; i += 32) out[dest[w] + i] = pool[start[w] + i];
}
"""
)

# gj_im_sample_block: 16 bytes of local memory per thread as the GPU compiles it (32 registers)
SAMPLE = Kernel(
    SAMPLE_KERNEL,
    ("gj_im_sample", "gj_im_sample_block", "gj_im_gather"),
    defines=IM_DEFINES,
    local_budget={"gj_im_sample_block": 16},
    label="influence",
)


def _launch_samples(rev, lt, key, root_key, rounds, jobs, cap, pool_cap, block: bool):
    """One pass over ``jobs``: a warp per sample, or with ``block`` a block of 512 threads per sample."""
    cp = import_cupy()
    n = rev.indptr.size - 1
    words = (n + 31) // 32
    if block:
        sms = sm_count()
        budget = min(_BUDGET, _free_bytes() // 4)
        groups = int(max(1, min(jobs.size, sms * 4, budget // (words * 4 + cap * 4))))
        grid, threads, name = (groups,), (512,), "gj_im_sample_block"
    else:
        groups, grid, threads = _grid(words * 4 + cap * 4, jobs.size)
        name = "gj_im_sample"
    bitmaps = cp.zeros(groups * words, dtype=np.uint32)
    scratch = cp.empty(groups * cap, dtype=np.int32)
    pool = cp.empty(max(pool_cap, 1), dtype=np.int32)
    start = cp.empty(jobs.size, dtype=np.int64)
    size = cp.zeros(jobs.size, dtype=np.int32)
    counters = cp.zeros(2, dtype=np.uint64)  # next task, pool used
    args = (
        rev.indptr,
        rev.indices,
        rev.p,
        rev.lo,
        np.int32(lt),
        np.int32(rev.equal_rows and not lt),
        np.int64(n),
        np.int32(rounds),
        np.uint64(key),
        np.uint64(root_key),
        jobs,
        np.int64(jobs.size),
        counters[0:1],
        bitmaps,
        np.int64(words),
        scratch,
        np.int64(cap),
        pool,
        np.int64(pool_cap),
        counters[1:2],
        start,
        size,
    )
    SAMPLE.get(name)(grid, threads, args)
    return pool, start, size


def sample(rev, lt: bool, key: int, root_key: int, rounds: int, j0: int, count: int, expected=None):
    """Members (int32 elements ``t*n + v``) and offsets of samples ``j0 .. j0+count-1``, in order.

    ``expected``: the mean sample size seen so far, to size the pool (``FIRST_MEAN`` per round when
    unknown).
    The first pass gives each sample a warp and a queue of ``_SCRATCH``; samples that outgrow it
    (the heavy tail of near-critical cascades, e.g. weighted cascade on social graphs) are redone
    by blocks of 512 threads with room for every vertex.
    """
    cp = import_cupy()
    n = rev.indptr.size - 1
    if rounds * n >= 2**31:
        raise ValueError(f"GPU influence maximization needs rounds * n < 2**31, got {rounds} * {n}")
    jobs = cp.arange(j0, j0 + count, dtype=np.int64)
    pool_cap = int(count * 1.25 * (expected or FIRST_MEAN * rounds)) + rounds * n
    sizes = cp.zeros(count, dtype=np.int64)
    passes = []
    todo = [(jobs, min(_SCRATCH, rounds * n), False, pool_cap)]
    while todo:
        jobs, cap, block, pool_cap = todo.pop()
        pool, start, size = _launch_samples(rev, lt, key, root_key, rounds, jobs, cap, pool_cap, block)
        ok = start >= 0
        passes.append((pool, start[ok], size[ok], jobs[ok]))
        sizes[jobs[ok] - j0] = size[ok]
        # samples that only missed the pool go again the same way with exactly the room they need;
        # those that outgrew their queue go to blocks with room for every vertex
        full, grew = start == -2, start == -1
        if bool(full.any()):
            todo.append((jobs[full], cap, block, int(size[full].sum())))
        if bool(grew.any()):
            spare = max(_free_bytes() // REDO_SHARE // 4, rounds * n)  # int32 elements
            todo.append((jobs[grew], rounds * n, True, min(int(cp.count_nonzero(grew)) * rounds * n, spare)))
    offsets = cp.zeros(count + 1, dtype=np.int64)
    cp.cumsum(sizes, out=offsets[1:])
    members = cp.empty(int(offsets[-1]), dtype=np.int32)
    for pool, start, size, done in passes:
        grid = (max(1, min(65535, (done.size + 7) // 8)),)
        SAMPLE.get("gj_im_gather")(
            grid, (256,), (pool, start, size, offsets[done - j0], np.int64(done.size), members)
        )
    return members, offsets


CASCADE_KERNEL = (
    IM_DEVICE
    + r"""
// Forward simulations first .. first + count - 1 by group g (taken from the counter `next`): out[s] is
// the number of vertices active in at least one round of simulation first + s.
template <class G>
__device__ void gj_im_cascades_group(const G& g, const long long* indptr, const int* indices, const float* p,
        const float* lo, int lt, long long n, const int* seeds, const long long* sptr, int rounds,
        unsigned long long key, long long first, long long count, unsigned long long* next,
        unsigned int* bitmaps, long long words, int* scratch, long long* out) {
    unsigned int* bm = bitmaps + g.id() * 2 * words;
    unsigned int* ever = bm + words;
    int* q = scratch + g.id() * n;
    for (long long s = gj_im_task(g, next); s < count; s = gj_im_task(g, next)) {
        long long reached = 0;
        for (int t = 0; t < rounds; ++t) {
            unsigned long long world = (unsigned long long)((first + s) * rounds + t);
            unsigned long long kt = gj_mix64(key + world * GJ_GOLDEN);
            long long size = 0;  // distinct seeds of round t enter the queue first
            for (long long i = sptr[t]; i < sptr[t + 1]; ++i) {
                int v = seeds[i];
                bool fresh = !(bm[v >> 5] & (1u << (v & 31)));
                g.sync();  // every member has read the bit before it is set
                if (fresh && g.rank() == 0) { bm[v >> 5] |= 1u << (v & 31); q[size] = v; }
                if (fresh) size += 1;
                g.sync();
            }
            size = gj_im_bfs(g, indptr, indices, p, lo, lt, 0, 0, kt, q, size, n, bm);
            long long fresh = 0, total;
            for (long long i = g.rank(); i < size; i += G::W) {
                unsigned int bit = 1u << (q[i] & 31);
                if (rounds == 1 || !(atomicOr(&ever[q[i] >> 5], bit) & bit)) fresh += 1;
            }
            g.scan(fresh, 0, 0, total);
            reached += total;
            gj_im_clear(g, bm, q, size, words, false);
        }
        if (rounds > 1) gj_im_clear(g, ever, q, 0, words, true);
        if (g.rank() == 0) out[s] = reached;
    }
}

#define GJ_IM_CASCADE_ARGS const long long* indptr, const int* indices, const float* p, const float* lo, \
        int lt, long long n, const int* seeds, const long long* sptr, int rounds, unsigned long long key, \
        long long first, long long count, unsigned long long* next, unsigned int* bitmaps, long long words, \
        int* scratch, long long* out
#define GJ_IM_CASCADE_PASS indptr, indices, p, lo, lt, n, seeds, sptr, rounds, key, first, count, next, \
        bitmaps, words, scratch, out

extern "C" __global__ void gj_im_cascades(GJ_IM_CASCADE_ARGS) {
    gj_im_cascades_group(GjWarp(), GJ_IM_CASCADE_PASS);
}

extern "C" __global__ void __launch_bounds__(512) gj_im_cascades_block(GJ_IM_CASCADE_ARGS) {
    __shared__ long long s[3 * GjBlock::W + 2];
    gj_im_cascades_group(GjBlock{s}, GJ_IM_CASCADE_PASS);
}
"""
)

# gj_im_cascades_block: 512 threads a block cap it at 128 registers; nvcc spills 12 bytes (16-byte frame)
CASCADES = Kernel(
    CASCADE_KERNEL,
    ("gj_im_cascades", "gj_im_cascades_block"),
    defines=IM_DEFINES,
    spill_budget={"gj_im_cascades_block": 12},
    local_budget={"gj_im_cascades_block": 16},
    label="influence-cascades",
)


def cascades(
    fwd, lt: bool, key: int, seeds, seed_rounds, rounds: int, count: int, first: int = 0, block=None
):
    """Vertices active in at least one round, for each of the forward simulations ``first .. first +
    count - 1``. Each simulation holds a queue of n and two bitmaps; a warp runs one, or with ``block``
    a block of 512 threads (default: blocks when the memory budget leaves fewer than 8 warps an SM, as
    on graphs of tens of millions of vertices, where a cascade's frontier keeps 512 threads busy)."""
    cp = import_cupy()
    n = fwd.indptr.size - 1
    order = np.argsort(seed_rounds, kind="stable")
    sptr = np.zeros(rounds + 1, dtype=np.int64)
    np.cumsum(np.bincount(seed_rounds, minlength=rounds), out=sptr[1:])
    words = (n + 31) // 32
    per_group = words * 8 + n * 4
    budget = min(_BUDGET, _free_bytes() // 4)
    if block is None:
        block = budget // per_group < 8 * sm_count()
    if block:
        groups = int(max(1, min(count, sm_count() * 4, budget // per_group)))
        grid, threads, name = (groups,), (512,), "gj_im_cascades_block"
    else:
        groups, grid, threads = _grid(per_group, count)
        name = "gj_im_cascades"
    bitmaps = cp.zeros(groups * 2 * words, dtype=np.uint32)
    scratch = cp.empty(groups * n, dtype=np.int32)
    out = cp.zeros(count, dtype=np.int64)
    nxt = cp.zeros(1, dtype=np.uint64)
    args = (
        fwd.indptr,
        fwd.indices,
        fwd.p,
        fwd.lo,
        np.int32(lt),
        np.int64(n),
        cp.asarray(seeds[order].astype(np.int32)),
        cp.asarray(sptr),
        np.int32(rounds),
        np.uint64(key),
        np.int64(first),
        np.int64(count),
        nxt,
        bitmaps,
        np.int64(words),
        scratch,
        out,
    )
    CASCADES.get(name)(grid, threads, args)
    return out
