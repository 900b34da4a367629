"""The top-k query's GPU kernels one step at a time against NumPy: the push (mass, thresholds,
touched lists, schedules), candidates and Alg. 4, Alg. 6's estimates, and the round's top k."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
from graphs._device import to_host
from operators import TopkTuning, build_ppr_index, topk_ppr
from operators.topk.cache import QueryCache
from tests.operators.topk.test_index import _host
from tests.operators.topk.test_topk_ppr import _sources


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("persistent", "blocks"),
    [(True, None), (True, 3), (False, None)],
    ids=["persistent", "3-blocks", "per-frontier"],
)
def test_gpu_push_conserves_mass_and_empties_the_frontier(rmat13, persistent, blocks):
    """After a round's push: reserves + residues = 1, no vertex above its threshold, every vertex
    with mass listed once in ``touched``. With 3 persistent blocks a thread claims up to a dozen
    frontier vertices and a block's edges reach past the chunks of many warps."""
    import cupy as cp

    from operators.topk.gpu import GPUQuery

    idx = build_ppr_index(rmat13.to("gpu"), seed=2)
    q = GPUQuery(idx)
    q.blocks = blocks or q.blocks
    p = q.push_state
    for s in _sources(rmat13, 3, seed=1):
        q.start(int(s))
        for delta in (1e-3, 1e-4, 1e-5):  # three rounds: each regenerates its frontier from touched
            rmax = idx.params.r_max(delta)
            q.push(rmax, adaptive=True, tiling=True, persistent=persistent)
            r, pi0 = p.r.get(), p.pi0.get()
            assert abs(r.sum() + pi0.sum() - 1.0) < 1e-9 and (r >= 0).all() and (pi0 >= 0).all()
            assert (r <= p.thresholds(True).get() * rmax * (1 + 1e-12)).all()
            touched = p.touched[: p.ntouched()].get()
            assert (np.diff(touched) > 0).all()  # once each, in vertex order
            assert set(np.flatnonzero((r > 0) | (pi0 > 0))) <= set(touched.tolist())
            np.testing.assert_array_equal(np.flatnonzero(p.seen.get()), touched)
        cp.cuda.Device().synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("n", "share", "blocks"),
    [(1003, 0.3, None), (4096, 0.3, None), (4096, 0.02, None), (200_003, 0.02, 3), (200_003, 0.3, 1)],
)
def test_gpu_touched_list_from_seen_flags(n, share, blocks):
    """``list_seen`` lists exactly the flagged vertices (any nonzero byte) in vertex order (n % 16 != 0:
    the last word's bytes past n are the buffer's zeros), and the next query's start clears them
    (densely, or by the list when they are fewer than n / DENSE_CLEAR). With few blocks (as when several
    queries run at once) a tile spans several words per thread, and a block several rounds of tiles;
    the first tenth of the vertices is flagged densely, as a degree-ordered graph's hubs are."""
    import cupy as cp

    from operators.topk.gpu import GPUQuery
    from operators.topk.gpu.seen import list_seen

    q = GPUQuery(build_ppr_index(graphs.barabasi_albert(n, 3, seed=0, device="gpu"), seed=0))
    q.blocks = blocks or q.blocks
    p = q.push_state
    rng = np.random.default_rng(n)
    flags = rng.random(n) < np.where(np.arange(n) < n // 10, 0.9, share)
    flags[-1] = True
    p.seen[:] = cp.asarray(flags * rng.integers(1, 256, n), dtype=cp.uint8)
    p.r[:] = cp.asarray(flags.astype(np.float64))
    list_seen(p, q.blocks)
    assert p.ntouched() == flags.sum()
    np.testing.assert_array_equal(p.touched[: p.ntouched()].get(), np.flatnonzero(flags))
    q.start(0)
    assert np.flatnonzero(p.seen.get()).tolist() == [0] and p.ntouched() == 1
    assert np.flatnonzero(p.r.get()).tolist() == [0]


@pytest.mark.gpu
def test_gpu_vertex_records_hold_thresholds_rounded_down(rmat13):
    """Each vertex's 16-byte record holds its residue, its threshold as the largest float not above
    the double one (adaptive or not, rewritten only on a switch) and its flags; a query's start
    zeroes residues and flags but keeps the thresholds."""
    import cupy as cp

    from operators.topk.gpu import GPUQuery

    q = GPUQuery(build_ppr_index(rmat13.to("gpu"), seed=2))
    p = q.push_state
    floats, flags = p.state.view(cp.float32)[2::4], p.state.view(cp.int32)[3::4]
    for adaptive in (True, False, True):
        p.load_thresholds(adaptive)
        want, got = p.thresholds(adaptive).get(), floats.get().astype(np.float64)
        below = np.nextafter(floats.get(), np.float32(np.inf)).astype(np.float64)
        assert (got <= want).all() and (below > want).all() and (got < want).any() == adaptive
    p.r[:] = 0.5  # as if the last query had touched every vertex
    flags[:] = 3
    p.touched[:] = cp.arange(rmat13.n, dtype=cp.int32)
    p.counts[3] = rmat13.n
    q.start(7)
    assert p.r.get().sum() == 1.0 and p.r.get()[7] == 1.0 and not flags.get().any()
    np.testing.assert_array_equal(floats.get(), got.astype(np.float32))


@pytest.mark.gpu
def test_gpu_start_clears_the_claimed_reserves(rmat13):
    """A claim sets bit 2 of the vertex's flags (its reserve pi0 written); after a push that touched
    fewer than n / DENSE_CLEAR vertices, the next start clears them one by one, pi0 only where that bit
    is set, and leaves no residue, reserve or flag of the last query."""
    import cupy as cp

    from operators.topk.gpu import DENSE_CLEAR, GPUQuery

    idx = build_ppr_index(rmat13.to("gpu"), seed=2)
    q, n = GPUQuery(idx), rmat13.n
    p = q.push_state
    p.load_thresholds(True)
    flags = p.state.view(cp.int32)[3::4]
    deg = np.diff(to_host(idx.graph.indptr))  # the query's ids are the index's (a copy by degree)
    sources = np.flatnonzero(deg > 0)
    sources = sources[np.argsort(deg[sources], kind="stable")][:: sources.size // 40]  # all degrees
    checked = 0
    for s in sources:
        for delta in (1.0, 10.0):  # large r_max: a few hundred touched, a few dozen claimed (of n = 8,192)
            q.start(int(s))
            q.push(idx.params.r_max(delta), adaptive=True, tiling=True, persistent=True)
            pi0, f, nt = p.pi0.get(), flags.get(), p.ntouched()
            touched = p.touched[:nt].get()
            assert ((f[pi0 > 0] & 4) > 0).all()  # every reserve written is flagged
            assert set(np.flatnonzero(f & 4)) <= set(touched)
            claimed = int((pi0 > 0).sum())
            if nt * DENSE_CLEAR > n or not 1 < claimed < nt:
                continue
            q.start(int(s))
            assert not p.pi0.get().any() and not flags.get().any()
            assert np.flatnonzero(p.r.get()).tolist() == [s] and p.r.get()[s] == 1.0
            checked += 1
    assert checked >= 5


@pytest.mark.gpu
def test_gpu_push_schedules_agree(rmat13):
    """The persistent push and the paper's launch per frontier answer alike."""
    idx = build_ppr_index(rmat13.to("gpu"), seed=9)
    srcs = _sources(rmat13, 12)
    a = topk_ppr(idx, srcs, k=100, tuning=TopkTuning(persistent=True))
    b = topk_ppr(idx, srcs, k=100, tuning=TopkTuning(persistent=False))
    overlap = [len(set(x) & set(y)) / 100 for x, y in zip(a.vertices, b.vertices, strict=True)]
    assert np.mean(overlap) >= 0.97
    np.testing.assert_allclose(a.ppr[:, :10], b.ppr[:, :10], rtol=0.02)


@pytest.fixture(scope="module")
def rmat16_gpu():
    """A GPU index whose |H| = 65 makes H lists longer than a warp."""
    return build_ppr_index(graphs.rmat(16, seed=3, device="gpu"), seed=2)


def _pushed_query(idx):
    """A GPU query from the source with the longest H list, pushed once at delta 1e-6; with the host
    arrays of the index and the query's residues, reserves and touched list."""
    from operators.topk.gpu import GPUQuery

    q, a = GPUQuery(idx), _host(idx)
    q.start(int(np.argmax(np.diff(a["hptr"]))))
    q.push(idx.params.r_max(1e-6), adaptive=True, tiling=True, persistent=True)
    p = q.push_state
    return q, a, p.r.get(), p.pi0.get(), p.touched[: p.ntouched()].get()


@pytest.mark.gpu
def test_bound_smem_plan_copies_all_of_h_or_its_first_part():
    """|H| of a shared copy: all of it where it fits, else as much as a block may hold (R-MAT 26's
    67,099 on an H100), never past the block's opt-in shared memory."""
    import cupy as cp

    from operators.topk.gpu.entries import MAX_SEGMENTS, bound_smem_plan

    optin = cp.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
    assert bound_smem_plan(65) == (4 * 65, 2, 65)
    for nh in (16_707, 67_099, 10**7):
        smem, per_sm, ncache = bound_smem_plan(nh)
        assert per_sm >= 1 and smem == 4 * ncache and smem + 8 * (MAX_SEGMENTS + 1) + 1024 <= optin
        assert ncache == nh if 4 * nh + 8 * (MAX_SEGMENTS + 1) + 1024 <= optin else 4096 <= ncache < nh


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("wide", "fast", "narrow", "words"),
    [
        (False, None, False, 16),
        (True, None, False, 16),
        (False, 1, False, 16),
        (False, None, True, 16),
        (False, None, False, 32),
        (True, 1, False, 32),
    ],
    ids=[
        "32-bit-places",
        "64-bit-places",
        "runs-of-32",
        "chunks-of-a-narrow-grid",
        "32-bit-entries",
        "64-bit-places-32-bit-entries-runs-of-32",
    ],
)
def test_gpu_candidates_and_bound_reduction(rmat16_gpu, monkeypatch, wide, fast, narrow, words):
    """One pass lists the candidates pi0 >= tau (outside H when asked) and Alg. 4 equals a direct
    NumPy sum over the touched vertices' H lists, added a list per lane or warp, or balanced over the
    entries in shared memory or in global memory (when |H| would not fit), from any est_h; with the
    entries' places in 32 or 64 bits (the latter from WIDE_ENTRIES entries on), H entries of 16 or 32
    bits (``_topk_gpu_lists.NARROW_H``), or with a shared copy of H's first half, the rest added to
    est_h itself. |H| = 65 here, so the
    steps inside one list (BOUND_FAST x 32 entries) are taken only with BOUND_FAST = 1. A grid of one
    SM's blocks (``narrow``) gives each warp many chunks of the entries, strided over them."""
    import functools

    from operators.topk.gpu import bound, entries, lists

    # the index's round constants are built again here, and the index's own put back after the test
    lists.round_constants(rmat16_gpu)
    monkeypatch.delitem(rmat16_gpu.cache._items, "round_constants")
    if words == 32:
        monkeypatch.setattr(lists, "NARROW_H", 0)
    if wide:
        monkeypatch.setattr(bound, "WIDE_ENTRIES", 0)
    if fast:  # a fresh cache of the kernels (their variant), restored with the module's after the test
        monkeypatch.setattr(entries, "BOUND_FAST", fast)
        monkeypatch.setattr(entries, "_smem_kernel", functools.cache(entries._smem_kernel.__wrapped__))

    q, a, r, pi0, touched = _pushed_query(rmat16_gpu)
    c = q.candidates
    assert c.constants.h_pack.dtype == (np.uint16 if words == 16 else np.uint32)
    if narrow:
        c.sm_blocks = 1
    v = np.flatnonzero(r > 0)
    lo, hi = a["hptr"][v], a["hptr"][v + 1]
    owner = np.repeat(np.arange(v.size), hi - lo)  # entry j of v's list is hptr[v] + j
    entry = np.arange(owner.size) - np.repeat(np.cumsum(hi - lo) - (hi - lo) - lo, hi - lo)
    w = rmat16_gpu.params.walk_share * r[v] / a["omega"][v]  # first-step walks carry alpha of r(v)
    expect = np.zeros(c.nh + 1)
    np.add.at(expect, a["h_end"][entry], w[owner] * a["h_freq"][entry])
    expect[c.nh] = (w * a["ret"][v]).sum()
    assert (hi - lo).max() > 32 and (hi - lo > 0).sum() > 100 and touched.size > 4 * c.seg_entries.size
    assert c.bound_smem[1] > 0 and c.bound_smem[2] == c.nh
    assert not narrow or owner.size > 64 * 4 * 32  # BOUND_SPREAD chunks of 32 or more, each of 64 warps
    tau = float(np.quantile(pi0[touched], 0.9))
    assert c.bound_by_vertex
    ways = [(True, c.bound_smem, True), (False, c.bound_smem, True), (False, c.bound_smem, False)]
    # the pass over the entries takes w(v) in float and forms each term w(v) f in float (two roundings);
    # the shared-memory copy adds in float too: a bin of N terms (all positive) is off by at most
    # (N + 2) 2^-24 of its sum, whatever block took them; the lane-or-warp way adds in double
    terms = np.append(np.bincount(a["h_end"][entry], minlength=c.nh), 0)
    in_float = (terms + 2) * 2.0**-24 * expect
    half = c.nh // 2  # a shared copy of H's first half only, as when |H| does not fit (R-MAT 26)
    ways += [(False, (4 * half, 1, half), True), (False, (0, 0, 0), True)]
    for by_vertex, plan, exclude_h in ways:
        c.bound_by_vertex, c.bound_smem = by_vertex, plan
        c.est_h.fill(1.0)
        q.push_state.counts[6] = 0
        c.select_and_bound(tau, exclude_h, q.in_flight)
        got, shared = c.est_h.get(), not by_vertex and plan[1] > 0
        tol = in_float if shared else 1e-9 * expect if by_vertex else 2.0**-23 * expect
        assert (np.abs(got - expect) <= tol + 1e-15).all()
        assert np.abs(got[c.nh] - expect[c.nh]) <= 1e-12 * expect[c.nh]  # returned mass: in double
        listed = c.ids[c.nh : c.nh + int(q.push_state.counts[6])].get()
        want = touched[(pi0[touched] >= tau) & ~(exclude_h & (a["h_index"][touched] >= 0))]
        assert listed.size == np.unique(listed).size and set(listed) == set(want) and want.size > 10


@pytest.mark.gpu
@pytest.mark.parametrize("steps", [1, 4, None], ids=["blocks", "tiles-and-blocks", "threads"])
def test_gpu_estimates_sum_each_start_list(rmat16_gpu, monkeypatch, steps):
    """Alg. 6 on the GPU equals a NumPy sum over each listed vertex's start list (pi0, plus the walks
    of the starts with residue, plus the H part), whether a tile or a block (a list longer than
    BIG_STEPS steps of a tile) adds the list, or a thread (no tiling)."""
    from operators.topk.gpu import estimate

    q, a, r, pi0, touched = _pushed_query(rmat16_gpu)
    c, counts = q.candidates, q.push_state.counts
    c.select_and_bound(float(np.quantile(pi0[touched], 0.5)), True, q.in_flight)
    listed = c.nh + int(counts[6])
    if steps:
        monkeypatch.setattr(estimate, "BIG_STEPS", steps)
    estimate.compute_ppr_gpu(c, c.ids, c.nh, 8 if steps else 1)
    ids, est_h, got = c.ids[:listed].get(), c.est_h.get(), c.est[:listed].get()
    P = rmat16_gpu.params  # first-step walks: alpha of r(v) on the walks, 1 - alpha of r(t) exactly
    ip1, ip2, w = a["ip1"], a["ip2"], np.where(r > 0, P.walk_share * r / a["omega"], 0.0)
    expect, lengths = np.empty(listed), ip1[ids + 1] - ip1[ids]
    for i, t in enumerate(ids):
        walks = np.ones(lengths[i])
        walks[: ip2[t + 1] - ip2[t]] = a["freqs"][ip2[t] : ip2[t + 1]]
        h = a["h_index"][t]
        own = pi0[t] + P.own_share * r[t]
        expect[i] = own + (w[a["starts"][ip1[t] : ip1[t + 1]]] * walks).sum() + (est_h[h] if h >= 0 else 0)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-18)
    big = int(counts[7])  # the lists that blocks added
    assert big == ((lengths > 8 * steps).sum() if steps else 0) and listed > c.nh + 100
    if steps:
        assert big > 50 and (steps == 1 or big < (lengths > 0).sum())


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("size", "offset", "k", "distinct"),
    [
        (0, 0, 10, 50),
        (6, 2, 10, 50),
        (100, 30, 100, 7),
        (20_000, 75, 1000, 300),
        (5_000, 0, 10, 1),
        (70_000, 4_000, 100, 10**9),
    ],
    ids=["empty", "fewer-than-k", "exactly-k", "many-ties", "ties-beyond-the-buffer", "large"],
)
def test_gpu_round_top_matches_select_top(size, offset, k, distinct):
    """The round's top k on the GPU (radix select + one packed read) equals ``select_top`` over the
    whole list read back, ties at the k-th value included, and carries the round's record."""
    from types import SimpleNamespace

    import cupy as cp

    from operators.topk.cpu import select_top
    from operators.topk.gpu.select import RoundTops

    rng = np.random.default_rng(size + k)
    est = rng.integers(0, distinct, size) / distinct * rng.pareto(1.5)
    ids = rng.permutation(10 * size + 10)[:size].astype(np.int32)
    counts = np.zeros(8, dtype=np.int32)
    counts[3], counts[6], counts[7] = 11, size - offset, 3
    nh = 4
    cands = SimpleNamespace(  # the round's list and H's part (``Candidates``)
        est=cp.asarray(np.concatenate((est, [-1.0] * 5))),  # entries past the list are not read
        est_h=cp.asarray([0.0] * nh + [0.125]),
        nh=nh,
    )
    push = SimpleNamespace(counts=cp.asarray(counts), stats=cp.asarray([5, 6, 7], dtype=cp.uint64))
    index = SimpleNamespace(perm=None, cache=QueryCache())  # ties by these ids (its graph's numbering)
    tops = RoundTops(index, cands, push)
    for _ in range(2):  # the buffers are reused: counters must be left at zero
        push.counts[6] = size - offset
        tops.launch(cp.asarray(ids), offset, k)
        cp.cuda.get_current_stream().synchronize()  # the copy into pinned memory is asynchronous
        verts, got = tops.read(cp.asarray(ids), offset, k)
        best = select_top(ids.astype(np.int64), est, k)
        np.testing.assert_array_equal(verts, ids[best])
        np.testing.assert_array_equal(got, est[best])
        np.testing.assert_array_equal(tops.record, [size - offset, 11, 0.125, 5, 6, 7])
        assert int(push.counts[6]) == 0 and int(push.counts[7]) == 0
