"""kPAR top-k PPR: index invariants, save/load, accuracy against exact PPR, CPU/GPU agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest

import graphs
from graphs._device import to_host
from operators import build_ppr_index, load_ppr_index, ppr, topk_ppr
from operators.ppr_metrics import ndcg_at_k, precision_at_k
from tests.conftest import DEVICES, snap


def _host(index):
    return {k: to_host(v) for k, v in index.arrays.items()}


@pytest.fixture(scope="module")
def rmat13():
    return graphs.rmat(13, seed=11, device="cpu")


def test_index_invariants(rmat13):
    g = rmat13
    idx = build_ppr_index(g, seed=3)
    a, p = _host(idx), idx.params
    deg1 = np.maximum(np.diff(g.indptr), 1)
    # every walk is counted once: in the IRW, in H's arrays, or as returned to the source
    full = np.diff(a["ip2"]).sum()  # entries with explicit frequencies
    irw_walks = a["freqs"].sum() + (a["starts"].size - full)
    assert irw_walks + a["h_freq"].sum() + a["ret"].sum() == a["omega"].sum() == idx.walks
    # omega(v) >= d(v) r_max(v) psi / delta_min, so one walk weighs at most rho
    need = deg1 * a["beta"] * p.r_max(p.delta_min) * p.psi / p.delta_min
    assert (a["omega"] >= need - 1e-9).all() and (a["beta"] >= 1).all()
    base = np.ceil(deg1 * p.r_max(p.delta_min) * p.psi / p.delta_min)
    extra = a["omega"].sum() - base.sum()
    assert 0 < extra <= 0.2 * base.sum()
    # each end vertex lists frequency > 1 starts first; starts are distinct
    for t in range(0, g.n, 7):
        lo, hi = a["ip1"][t], a["ip1"][t + 1]
        nf = a["ip2"][t + 1] - a["ip2"][t]
        assert (a["freqs"][a["ip2"][t] : a["ip2"][t + 1]] > 1).all() and nf <= hi - lo
        assert np.unique(a["starts"][lo:hi]).size == hi - lo
    # H: at most 0.1% of n, out of the IRW, holding the largest omega_I; omega_I^ub bounds the rest
    high = a["high"]
    assert 0 < high.size <= 0.001 * g.n
    assert (a["ip1"][high + 1] == a["ip1"][high]).all()
    rest = np.setdiff1d(np.arange(g.n), high)
    assert a["omega_i"][rest].max() == idx.omega_i_ub < a["omega_i"][high].min()
    assert (a["h_index"][high] == np.arange(high.size)).all()


def _walks_by_pair(hptr, h, freq, nh):
    """Walks per (start vertex, H vertex) of a start-list layout, as a dense matrix."""
    owner = np.repeat(np.arange(hptr.size - 1), np.diff(hptr))
    sums = np.zeros((hptr.size - 1, nh), dtype=np.int64)
    np.add.at(sums, (owner, h), freq)
    return sums


@pytest.mark.parametrize("scale", [1, 1 << 24, 1 << 28])
def test_packed_h_entries_keep_every_walk(rmat13, scale):
    # the GPU's one-word H entries keep each start list's walks per H vertex; counts too large for the
    # word (scaled up here) are split over several entries of the same H vertex
    from operators._topk_gpu_bound import pack_entries

    a = _host(build_ppr_index(rmat13, seed=3))
    nh, freq = a["high"].size, a["h_freq"].astype(np.int64) * scale
    hptr, words, hbits = pack_entries(a["hptr"], a["h_end"], freq, nh)
    assert hbits == (nh - 1).bit_length() and words.dtype == np.uint32
    got = _walks_by_pair(hptr, words & ((1 << hbits) - 1), (words >> hbits).astype(np.int64), nh)
    assert (got == _walks_by_pair(a["hptr"], a["h_end"], freq, nh)).all()
    split = freq.max() > (1 << (32 - hbits)) - 1
    assert split == (scale > 1) and (words.size > freq.size) == split
    if not split:  # the row pointer is the index's own
        assert hptr is a["hptr"]


def test_walks_follow_the_ppr_distribution():
    # the index's walks from v end at t with frequency ~ pi_v(t) without the return-to-source part
    g = graphs.barabasi_albert(200, 3, seed=2)  # undirected: no vertex without out-edges
    idx = build_ppr_index(g, seed=1, delta_min=1e-4)
    a = _host(idx)
    v = int(np.argmax(a["omega"]))
    exact = to_host(ppr(g, [g.ids[v] if g.ids is not None else v], method="power", tol=1e-10))[0]
    counts = np.zeros(g.n)
    for t in range(g.n):
        lo, hi = a["ip1"][t], a["ip1"][t + 1]
        hit = np.flatnonzero(a["starts"][lo:hi] == v)
        if hit.size:
            j = hit[0]
            nf = a["ip2"][t + 1] - a["ip2"][t]
            counts[t] = a["freqs"][a["ip2"][t] + j] if j < nf else 1
    for t, h in enumerate(a["high"]):
        sel = np.flatnonzero(a["h_end"][a["hptr"][v] : a["hptr"][v + 1]] == t)
        counts[h] += a["h_freq"][a["hptr"][v] + sel].sum()
    w = a["omega"][v]
    assert g.out_degree().min() > 0 and a["ret"][v] == 0
    # chi-square style bound: every frequency within 5 standard deviations of w * pi
    sd = np.sqrt(w * exact * (1 - exact)) + 1
    assert (np.abs(counts - w * exact) <= 5 * sd).all()


@pytest.mark.parametrize("device", DEVICES)
def test_save_load_round_trip(tmp_path, rmat13, device):
    g = rmat13.to(device)
    idx = build_ppr_index(g, seed=5)
    idx.save(tmp_path / "idx")
    back = load_ppr_index(tmp_path / "idx", g)
    for name, arr in idx.arrays.items():
        np.testing.assert_array_equal(to_host(back.arrays[name]), to_host(arr))
    assert back.params == idx.params and back.omega_i_ub == idx.omega_i_ub
    a = topk_ppr(idx, [1, 2], k=20)
    b = topk_ppr(back, [1, 2], k=20)
    if device == "cpu":
        np.testing.assert_array_equal(a.vertices, b.vertices)
    else:  # floating-point atomics: the same answer up to the order of near-ties
        for x, y in zip(a.vertices, b.vertices, strict=True):
            assert len(set(x) & set(y)) >= 19
        np.testing.assert_allclose(a.ppr, b.ppr, rtol=1e-3)
    other = graphs.rmat(13, seed=12, device="cpu").to(device)
    with pytest.raises(ValueError, match="built for graph"):
        load_ppr_index(tmp_path / "idx", other)
    with pytest.raises(FileExistsError):
        idx.save(tmp_path / "idx")


def _accuracy(g, idx, sources, k, **kw):
    res = topk_ppr(idx, sources, k=k, **kw)
    exact = to_host(ppr(g, sources, method="power", tol=1e-10))
    prec, ndcg, good, total = [], [], 0, 0
    p = idx.params
    for i in range(len(sources)):
        ids = g.internal_ids(res.vertices[i])
        prec.append(precision_at_k(exact[i], ids, k))
        ndcg.append(ndcg_at_k(exact[i], ids, k))
        d = res.delta[i]
        covered = exact[i][ids] >= max(d, math.sqrt(d * p.delta_min))
        err = np.abs(res.ppr[i] - exact[i][ids]) <= p.epsilon * exact[i][ids]
        good += int((err & covered).sum())
        total += int(covered.sum())
    return np.mean(prec), np.mean(ndcg), good / max(total, 1), res


def _sources(g, count, seed=0):
    # sources with out-edges, so that the top k is not a tie of zeros
    rng = np.random.default_rng(seed)
    ok = np.flatnonzero(np.diff(to_host(g.indptr)) > 0)
    ids = rng.choice(ok, size=count, replace=False)
    return ids if g.ids is None else to_host(g.ids)[ids]


@pytest.mark.parametrize("k", [10, 100, 500])
def test_topk_accuracy_on_generated_graph(rmat13, k):
    idx = build_ppr_index(rmat13, seed=0)
    prec, ndcg, guarantee, res = _accuracy(rmat13, idx, _sources(rmat13, 8), k)
    assert prec >= 0.95 and ndcg >= 0.95 and guarantee >= 0.99
    assert (np.diff(res.ppr, axis=1) <= 0).all()  # decreasing estimates


@pytest.mark.parametrize("name", ["wiki-Vote", "soc-Epinions1"])
def test_topk_accuracy_on_snap_graphs(name):
    g = snap(name)
    idx = build_ppr_index(g, seed=0)
    for k in (10, 100, 500):
        prec, ndcg, guarantee, _ = _accuracy(g, idx, _sources(g, 5, seed=k), k)
        assert prec >= 0.95 and ndcg >= 0.95 and guarantee >= 0.99, (k, prec, ndcg, guarantee)


@pytest.mark.parametrize(
    "switches",
    [
        dict(adaptive=False, high_irw=False, tiling=False, persistent=False, jump=False),
        dict(high_irw=False),
        dict(max_rounds=1, delta_init=0.1),
    ],
    ids=["kPAR_I", "no-H", "fallback"],
)
@pytest.mark.parametrize("device", DEVICES)
def test_ablations_and_fallback_stay_accurate(rmat13, switches, device):
    g = rmat13.to(device)
    idx = build_ppr_index(g, seed=0)
    prec, ndcg, guarantee, res = _accuracy(rmat13, idx, _sources(rmat13, 6), 50, **switches)
    assert prec >= 0.95 - 1e-12 and ndcg >= 0.95 and guarantee >= 0.99  # a mean of 300 hits: 285 is 0.95
    assert res.fallback.all() == ("max_rounds" in switches)


def test_hand_checked_star():
    # a star: the centre 0 points to 1..5 and each leaf points back to 0
    src = np.array([0, 0, 0, 0, 0, 1, 2, 3, 4, 5])
    dst = np.array([1, 2, 3, 4, 5, 0, 0, 0, 0, 0])
    g = graphs.from_edges(src, dst)
    res = topk_ppr(build_ppr_index(g, seed=0), [0, 3], k=3)
    # from 0: pi(0) = 0.2 / (1 - 0.64) = 5/9, every leaf 0.8 * 5/9 / 5 = 4/45
    assert res.vertices[0][0] == 0 and res.ppr[0][0] == pytest.approx(5 / 9, rel=0.05)
    np.testing.assert_allclose(res.ppr[0][1:], 4 / 45, rtol=0.05)
    # from leaf 3: pi(0) = 0.8 (0.2 + 0.8 pi(0)) ... = 4/9, pi(3) = 0.2 + 0.16 * 4/9 = 61/225
    assert res.vertices[1][:2].tolist() == [0, 3]
    np.testing.assert_allclose(res.ppr[1][:2], [4 / 9, 61 / 225], rtol=0.05)


def test_bad_sources_fail_before_any_work(rmat13):
    idx = build_ppr_index(rmat13, seed=0)
    with pytest.raises(KeyError, match="not in the graph"):
        topk_ppr(idx, [1, 2, 10**9], k=5)
    with pytest.raises(TypeError, match="PPRIndex"):
        topk_ppr(rmat13, [1], k=5)


def test_streams_are_checked(rmat13):
    idx = build_ppr_index(rmat13, seed=0)
    with pytest.raises(ValueError, match="needs the graph on the GPU"):
        topk_ppr(idx, [1, 2], k=5, streams=2)
    with pytest.raises(ValueError, match="streams must be an integer >= 1"):
        topk_ppr(idx, [1, 2], k=5, streams=0)
    assert topk_ppr(idx, [1, 2], k=5, streams=1).vertices.shape == (2, 5)


@pytest.mark.gpu
def test_gpu_streams_answer_as_one_at_a_time(rmat13):
    """Sources answered at once on 4 streams (workspaces kept for the next call) equal those in turn."""
    idx = build_ppr_index(rmat13.to("gpu"), seed=9)
    srcs = _sources(rmat13, 40)
    one = topk_ppr(idx, srcs, k=50, streams=1)
    for _ in range(2):
        many = topk_ppr(idx, srcs, k=50, streams=4)
        assert idx._stream_pool.size == 4  # one workspace per thread, reused by the second call
        same = [list(x) == list(y) for x, y in zip(one.vertices, many.vertices, strict=True)]
        assert np.mean(same) >= 0.95  # atomic float adds may reorder near-ties
        np.testing.assert_allclose(many.ppr, one.ppr, rtol=1e-6)
        assert (many.rounds == one.rounds).mean() >= 0.95 and list(many.sources) == list(one.sources)


@pytest.mark.gpu
def test_gpu_and_cpu_agree(rmat13):
    cpu = build_ppr_index(rmat13, seed=9)
    gpu = build_ppr_index(rmat13.to("gpu"), seed=9)
    for name, arr in cpu.arrays.items():  # counter-based walks: the same index on both
        np.testing.assert_allclose(to_host(gpu.arrays[name]), arr, rtol=1e-12, err_msg=name)
    srcs = _sources(rmat13, 10)
    a, b = topk_ppr(cpu, srcs, k=100), topk_ppr(gpu, srcs, k=100)
    overlap = [len(set(x) & set(y)) / 100 for x, y in zip(a.vertices, b.vertices, strict=True)]
    assert np.mean(overlap) >= 0.95
    common = [np.intersect1d(x, y) for x, y in zip(a.vertices, b.vertices, strict=True)]
    for i, c in enumerate(common):
        ea = dict(zip(a.vertices[i], a.ppr[i], strict=True))
        eb = dict(zip(b.vertices[i], b.ppr[i], strict=True))
        np.testing.assert_allclose([ea[v] for v in c], [eb[v] for v in c], rtol=0.1)


@pytest.mark.parametrize("device", DEVICES)
def test_small_closed_reach_is_answered_exactly(device):
    """Sources that reach few vertices (a self-loop only, no out-edge, a 4-vertex component with a
    double edge, a self-loop and a dangling vertex) get their exact PPR after one round, not ten
    failed rounds and the fallback; the other vertices follow with PPR 0, smallest ids first."""
    import networkx as nx

    base = graphs.barabasi_albert(300, 3, seed=4)
    src = np.repeat(np.arange(300), np.diff(base.indptr))
    extra = np.array([[300, 300], [1, 301], [0, 302], [302, 303], [302, 303], [303, 304], [303, 303]])
    extra = np.vstack([extra, [[304, 302], [304, 305]]])
    s_all, d_all = np.concatenate([src, extra[:, 0]]), np.concatenate([base.indices, extra[:, 1]])
    g = graphs.from_edges(s_all, d_all, n=306, renumber=False).to(device)
    idx = build_ppr_index(g, seed=0)
    sources, k = [300, 301, 302, 5], 10
    res = topk_ppr(idx, sources, k=k)
    assert res.exact.tolist() == [True, True, True, False] and not res.fallback.any()
    assert res.rounds[:3].tolist() == [1, 1, 1]
    nxg = nx.MultiDiGraph(list(zip(s_all.tolist(), d_all.tolist(), strict=True)))
    for i, s in enumerate(sources[:3]):
        exact = nx.pagerank(nxg, alpha=0.8, personalization={s: 1}, tol=1e-14, max_iter=2000)
        reach = sorted(v for v, x in exact.items() if x > 1e-12)  # the rest decay from uniform
        assert reach == sorted(res.vertices[i, : len(reach)].tolist())
        np.testing.assert_allclose(
            res.ppr[i, : len(reach)], [exact[v] for v in res.vertices[i, : len(reach)]], atol=1e-10
        )
        assert (np.diff(res.ppr[i]) <= 0).all() and (res.ppr[i, len(reach) :] == 0).all()
        rest = [v for v in range(306) if v not in reach][: k - len(reach)]
        assert res.vertices[i, len(reach) :].tolist() == rest


def test_delta_jumps_skip_rounds_not_accuracy():
    """Halving delta as often as a failed round's bounds need takes fewer rounds, same top k."""
    g = snap("wiki-Vote")
    idx = build_ppr_index(g, seed=0)
    srcs = _sources(g, 8, seed=4)
    one = topk_ppr(idx, srcs, k=200, jump=False)
    many = topk_ppr(idx, srcs, k=200)
    assert (many.rounds <= one.rounds).all() and many.rounds.sum() < one.rounds.sum()
    # a jump lands at delta_init / 2^j, never above the delta that one halving a round reaches
    assert (many.delta <= one.delta * (1 + 1e-12)).all()
    exact = to_host(ppr(g, srcs, method="power", tol=1e-10))
    for res in (one, many):
        prec = [precision_at_k(exact[i], g.internal_ids(res.vertices[i]), 200) for i in range(len(srcs))]
        assert np.mean(prec) >= 0.95


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

    from operators._topk_gpu import GPUQuery

    idx = build_ppr_index(rmat13.to("gpu"), seed=2)
    q = GPUQuery(idx)
    q.blocks = blocks or q.blocks
    for s in _sources(rmat13, 3, seed=1):
        q.start(int(s))
        for delta in (1e-3, 1e-4, 1e-5):  # three rounds: each regenerates its frontier from touched
            rmax = idx.params.r_max(delta)
            q.push(rmax, adaptive=True, tiling=True, persistent=persistent)
            r, pi0 = q.r.get(), q.pi0.get()
            assert abs(r.sum() + pi0.sum() - 1.0) < 1e-9 and (r >= 0).all() and (pi0 >= 0).all()
            assert (r <= q.thresholds(True).get() * rmax * (1 + 1e-12)).all()
            touched = q.touched[: q.ntouched()].get()
            assert (np.diff(touched) > 0).all()  # once each, in vertex order
            assert set(np.flatnonzero((r > 0) | (pi0 > 0))) <= set(touched.tolist())
            np.testing.assert_array_equal(np.flatnonzero(q.seen.get()), touched)
        cp.cuda.Device().synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "share"), [(1003, 0.3), (4096, 0.3), (4096, 0.02)])
def test_gpu_touched_list_from_seen_flags(n, share):
    """``list_seen`` lists exactly the flagged vertices in vertex order (n % 16 != 0: the last word is
    read byte by byte), and the next query's start clears them (densely, or by the list when they are
    fewer than n / DENSE_CLEAR)."""
    import cupy as cp

    from operators._topk_gpu import GPUQuery
    from operators._topk_gpu_seen import list_seen

    q = GPUQuery(build_ppr_index(graphs.barabasi_albert(n, 3, seed=0, device="gpu"), seed=0))
    flags = np.random.default_rng(n).random(n) < share
    flags[-1] = True
    q.seen[:] = cp.asarray(flags.astype(np.uint8))
    q.r[:] = cp.asarray(flags.astype(np.float64))
    list_seen(q)
    assert q.ntouched() == flags.sum()
    np.testing.assert_array_equal(q.touched[: q.ntouched()].get(), np.flatnonzero(flags))
    q.start(0)
    assert np.flatnonzero(q.seen.get()).tolist() == [0] and q.ntouched() == 1
    assert np.flatnonzero(q.r.get()).tolist() == [0]


@pytest.mark.gpu
def test_gpu_vertex_records_hold_thresholds_rounded_down(rmat13):
    """Each vertex's 16-byte record holds its residue, its threshold as the largest float not above
    the double one (adaptive or not, rewritten only on a switch) and its flags; a query's start
    zeroes residues and flags but keeps the thresholds."""
    import cupy as cp

    from operators._topk_gpu import GPUQuery

    q = GPUQuery(build_ppr_index(rmat13.to("gpu"), seed=2))
    floats, flags = q.state.view(cp.float32)[2::4], q.state.view(cp.int32)[3::4]
    for adaptive in (True, False, True):
        q.load_thresholds(adaptive)
        want, got = q.thresholds(adaptive).get(), floats.get().astype(np.float64)
        below = np.nextafter(floats.get(), np.float32(np.inf)).astype(np.float64)
        assert (got <= want).all() and (below > want).all() and (got < want).any() == adaptive
    q.r[:] = 0.5  # as if the last query had touched every vertex
    flags[:] = 3
    q.touched[:] = cp.arange(rmat13.n, dtype=cp.int32)
    q.counts[3] = rmat13.n
    q.start(7)
    assert q.r.get().sum() == 1.0 and q.r.get()[7] == 1.0 and not flags.get().any()
    np.testing.assert_array_equal(floats.get(), got.astype(np.float32))


@pytest.mark.gpu
def test_gpu_push_schedules_agree(rmat13):
    """The persistent push and the paper's launch per frontier answer alike."""
    idx = build_ppr_index(rmat13.to("gpu"), seed=9)
    srcs = _sources(rmat13, 12)
    a = topk_ppr(idx, srcs, k=100, persistent=True)
    b = topk_ppr(idx, srcs, k=100, persistent=False)
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
    from operators._topk_gpu import GPUQuery

    q, a = GPUQuery(idx), _host(idx)
    q.start(int(np.argmax(np.diff(a["hptr"]))))
    q.push(idx.params.r_max(1e-6), adaptive=True, tiling=True, persistent=True)
    return q, a, q.r.get(), q.pi0.get(), q.touched[: q.ntouched()].get()


@pytest.mark.gpu
def test_gpu_candidates_and_bound_reduction(rmat16_gpu):
    """One pass lists the candidates pi0 >= tau (outside H when asked) and Alg. 4 equals a direct
    NumPy sum over the touched vertices' H lists, added a list per lane or warp, or balanced over the
    entries in shared memory or in global memory (when |H| would not fit), from any est_h."""
    from operators._topk_gpu_bound import select_and_bound_gpu

    q, a, r, pi0, touched = _pushed_query(rmat16_gpu)
    v = np.flatnonzero(r > 0)
    lo, hi = a["hptr"][v], a["hptr"][v + 1]
    owner = np.repeat(np.arange(v.size), hi - lo)  # entry j of v's list is hptr[v] + j
    entry = np.arange(owner.size) - np.repeat(np.cumsum(hi - lo) - (hi - lo) - lo, hi - lo)
    w = r[v] / a["omega"][v]
    expect = np.zeros(q.nh + 1)
    np.add.at(expect, a["h_end"][entry], w[owner] * a["h_freq"][entry])
    expect[q.nh] = (w * a["ret"][v]).sum()
    assert (hi - lo).max() > 32 and (hi - lo > 0).sum() > 100 and touched.size > 4 * q.seg_entries.size
    assert q.bound_smem[1] > 0
    tau = float(np.quantile(pi0[touched], 0.9))
    assert q.bound_by_vertex
    ways = [(True, q.bound_smem, True), (False, q.bound_smem, True), (False, q.bound_smem, False)]
    # the shared-memory copy adds in float: a bin of N terms (all positive) is off by at most
    # (N + 1) 2^-24 of its sum (each term rounded once, each add once), whatever block took them
    terms = np.append(np.bincount(a["h_end"][entry], minlength=q.nh), 0)
    in_float = (terms + 1) * 2.0**-24 * expect
    for by_vertex, plan, exclude_h in [*ways, (False, (0, 0), True)]:
        q.bound_by_vertex, q.bound_smem = by_vertex, plan
        q.est_h.fill(1.0)
        q.counts[6] = 0
        select_and_bound_gpu(q, tau, exclude_h)
        got, shared = q.est_h.get(), not by_vertex and plan[1] > 0
        assert (np.abs(got - expect) <= (in_float if shared else 1e-9 * expect) + 1e-15).all()
        listed = q.ids[q.nh : q.nh + int(q.counts[6])].get()
        want = touched[(pi0[touched] >= tau) & ~(exclude_h & (a["h_index"][touched] >= 0))]
        assert listed.size == np.unique(listed).size and set(listed) == set(want) and want.size > 10


@pytest.mark.gpu
@pytest.mark.parametrize("steps", [1, 4, None], ids=["blocks", "tiles-and-blocks", "threads"])
def test_gpu_estimates_sum_each_start_list(rmat16_gpu, monkeypatch, steps):
    """Alg. 6 on the GPU equals a NumPy sum over each listed vertex's start list (pi0, plus the walks
    of the starts with residue, plus the H part), whether a tile or a block (a list longer than
    BIG_STEPS steps of a tile) adds the list, or a thread (no tiling)."""
    import operators._topk_gpu_estimate as estimate
    from operators._topk_gpu_bound import select_and_bound_gpu

    q, a, r, pi0, touched = _pushed_query(rmat16_gpu)
    select_and_bound_gpu(q, float(np.quantile(pi0[touched], 0.5)), True)
    listed = q.nh + int(q.counts[6])
    if steps:
        monkeypatch.setattr(estimate, "BIG_STEPS", steps)
    estimate.compute_ppr_gpu(q, q.ids, q.nh, 8 if steps else 1)
    ids, est_h, got = q.ids[:listed].get(), q.est_h.get(), q.est[:listed].get()
    ip1, ip2, w = a["ip1"], a["ip2"], np.where(r > 0, r / a["omega"], 0.0)
    expect, lengths = np.empty(listed), ip1[ids + 1] - ip1[ids]
    for i, t in enumerate(ids):
        walks = np.ones(lengths[i])
        walks[: ip2[t + 1] - ip2[t]] = a["freqs"][ip2[t] : ip2[t + 1]]
        h = a["h_index"][t]
        expect[i] = pi0[t] + (w[a["starts"][ip1[t] : ip1[t + 1]]] * walks).sum() + (est_h[h] if h >= 0 else 0)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-18)
    big = int(q.counts[7])  # the lists that blocks added
    assert big == ((lengths > 8 * steps).sum() if steps else 0) and listed > q.nh + 100
    if steps:
        assert big > 50 and (steps == 1 or big < (lengths > 0).sum())


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("size", "offset", "k", "distinct"),
    [(0, 0, 10, 50), (6, 2, 10, 50), (100, 30, 100, 7), (20_000, 75, 1000, 300), (5_000, 0, 10, 1),
     (70_000, 4_000, 100, 10**9)],
    ids=["empty", "fewer-than-k", "exactly-k", "many-ties", "ties-beyond-the-buffer", "large"],
)  # fmt: skip
def test_gpu_round_top_matches_select_top(size, offset, k, distinct):
    """The round's top k on the GPU (radix select + one packed read) equals ``select_top`` over the
    whole list read back, ties at the k-th value included, and carries the round's record."""
    from types import SimpleNamespace

    import cupy as cp

    from operators._topk_cpu import select_top
    from operators._topk_gpu_select import round_top

    rng = np.random.default_rng(size + k)
    est = rng.integers(0, distinct, size) / distinct * rng.pareto(1.5)
    ids = rng.permutation(10 * size + 10)[:size].astype(np.int32)
    counts = np.zeros(8, dtype=np.int32)
    counts[3], counts[6], counts[7] = 11, size - offset, 3
    nh = 4
    q = SimpleNamespace(
        est=cp.asarray(np.concatenate((est, [-1.0] * 5))),  # entries past the list are not read
        counts=cp.asarray(counts), est_h=cp.asarray([0.0] * nh + [0.125]), nh=nh,
        stats=cp.asarray([5, 6, 7], dtype=cp.uint64), record=None, round_top=None,
    )  # fmt: skip
    for _ in range(2):  # the buffers are reused: counters must be left at zero
        q.counts[6] = size - offset
        verts, got = round_top(q, cp.asarray(ids), offset, k)
        best = select_top(ids.astype(np.int64), est, k)
        np.testing.assert_array_equal(verts, ids[best])
        np.testing.assert_array_equal(got, est[best])
        np.testing.assert_array_equal(q.record, [size - offset, 11, 0.125, 5, 6, 7])
        assert int(q.counts[6]) == 0 and int(q.counts[7]) == 0
