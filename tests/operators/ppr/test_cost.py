"""The hybrid PPR solver's cost model: Phi_rdw, Phi_rdr and Phi_sqw on hand-made frontiers, the bounds
that prove push without statistics, the decisions each solver records against Psi, the grid layout
rule and the calibration's cache and push micro-benchmark."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphs
from graphs._device import to_host
from operators import ppr
from operators.ppr.cost import HYBRID, PULL, PUSH, CostModel, light_degree, phi_reference, pull_static
from operators.ppr.push_cpu import rdw_bound, solve
from operators.ppr.reference import _push_reference


def _solve(g, tr, tol, mode, costs, p, r, trace, serial):
    """``push_cpu.solve`` from vertex 0 at alpha 0.8 with ``costs`` = (weights, layout, static, degrees)."""
    deg = np.diff(g.indptr)
    return solve(
        g.indptr,
        g.indices,
        tr.indptr,
        tr.indices,
        deg,
        0,
        0.8,
        tol,
        mode,
        10**6,
        *costs,
        p,
        r,
        trace,
        serial,
        0,
    )


def test_solver_statistics_follow_the_reference():
    """Push mode: Phi_rdw of each active list and Phi_sqw of the previous receivers, recomputed."""
    g = graphs.rmat(9, seed=2, device="cpu")
    model = CostModel(blocks=3, warps=2, lanes=4)
    deg, tr = np.diff(g.indptr), g.transpose()
    ideg = np.diff(tr.indptr)
    trace = np.zeros((200, 5))
    p, r = np.zeros(g.n), np.zeros(g.n)
    costs = (np.array([2.3, 1.1, 1.0]), (3, 2, 4), pull_static(ideg, model), (-1, 0))
    it, out = _solve(g, tr, 1e-6, PUSH, costs, p, r, trace, False)
    ref_p, _, history = _push_reference(g, 0, 0.8, 1e-6)
    assert out == 0 and it == len(history)
    np.testing.assert_allclose(p, ref_p, atol=1e-15)
    received = set()
    for k, (active, got) in enumerate(history):
        rdw, _, sqw = phi_reference(active, deg, ideg, received, model)
        assert trace[k, 3] == len(active)
        assert trace[k, 1] == rdw and trace[k, 2] == pytest.approx(sqw)
        received = got


def _hybrid_trace(g, model, tol):
    """CPU hybrid solve from vertex 0 with ``model``: (iterations, trace rows)."""
    deg, tr = np.diff(g.indptr), g.transpose()
    weights, layout = np.array([model.l1, model.l2, model.l3]), (model.blocks, model.warps, model.lanes)
    static = pull_static(np.diff(tr.indptr), model)
    degrees = (light_degree(model, static[2], int(deg.max())), int(deg.max()))
    runs = []
    for serial in (False, True):  # pull sweeps on Numba's threads, or in the calling thread: the same
        trace = np.zeros((500, 5))
        p = np.zeros(g.n)
        it, out = _solve(
            g, tr, tol, HYBRID, (weights, layout, static, degrees), p, np.zeros(g.n), trace, serial
        )
        assert out == 0
        runs.append((it, trace[:it], p))
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    np.testing.assert_array_equal(runs[0][2], runs[1][2])
    return runs[0][:2]


def test_hybrid_skips_the_statistics_only_where_bounds_prove_push():
    """Rows marked bounded hold an upper bound of Phi_rdw and Phi_rdr (a lower bound of Phi_sqw) under
    which Psi < 0; the other rows hold the exact statistics, recomputed here from the reference."""
    g = graphs.rmat(9, seed=2, device="cpu")
    model = CostModel(blocks=3, warps=2, lanes=4)
    deg, ideg = np.diff(g.indptr), np.diff(g.transpose().indptr)
    it, trace = _hybrid_trace(g, model, 1e-6)
    _, _, history = _push_reference(g, 0, 0.8, 1e-6)
    assert it == len(history) and (trace[:, 0] == PUSH).all()  # push throughout: the reference's order
    received = set()
    for k, (active, got) in enumerate(history):
        rdw, rdr, sqw = phi_reference(active, deg, ideg, received, model)
        assert trace[k, 3] == len(active)
        if trace[k, 4]:
            assert k > 0 and trace[k, 1] >= rdw and trace[k, 2] == rdr <= sqw
            assert model.psi(trace[k, 1], trace[k, 2], trace[k, 2]) < 0
        else:
            assert trace[k, 1] == rdw and trace[k, 2] == pytest.approx(sqw)
        received = got
    assert 0 < trace[:, 4].sum() < it  # both kinds of rows occur


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 700), max_size=80),
    st.integers(-1, 800),
    st.integers(1, 6),
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_rdw_bound_is_never_below_phi(out_deg, light, blocks, warps, lanes):
    model = CostModel(blocks=blocks, warps=warps, lanes=lanes)
    d = np.array(out_deg, dtype=np.int64)
    exact = phi_reference(range(d.size), d, np.zeros(d.size, np.int64), set(), model)[0]
    heavy = int((d > light).sum())
    assert exact <= rdw_bound(d.size, heavy, light, int(d.max(initial=0)), blocks, warps, lanes)


def test_rdw_bound_by_hand():
    # 2 blocks of 2 warps of 4 lanes; out-degrees 9, 1, 4, 16, 3: per = ceil(5 / 4) = 2 slots per warp.
    # Exact: slots 0, 1, 4 (degrees 9, 1, 3) form block 0, ceil(/8) 2 + 1 + 1 plus its warp 0 (slots 0
    # and 4) ceil(/4) 3 + 1, so 8; block 1: 1 + 2 + max(1, 4) = 7.
    model = CostModel(blocks=2, warps=2, lanes=4)
    assert phi_reference(range(5), np.array([9, 1, 4, 16, 3]), np.zeros(5), set(), model)[0] == 8
    # light 8: 9 and 16 are heavy, so every degree is taken as dmax 16: 2 * (2 * 2 + 4) = 16
    assert rdw_bound(5, 2, 8, 16, 2, 2, 4) == 16
    assert rdw_bound(5, 0, 20, 16, 2, 2, 4) == 2 * (2 * 3 + 5)  # none heavy: light 20 bounds them
    assert rdw_bound(1, 0, 130, 500, 2, 2, 4) == 2 * 17 + 33  # one vertex: per = 1
    assert rdw_bound(0, 0, 5, 5, 2, 2, 4) == 0


def test_light_degree_is_the_largest_degree_that_proves_push():
    # l1 2, l2 + l3 = 2, Phi_rdr 10: 2 * (2 ceil(D / 8) + ceil(D / 4)) < 20 holds up to D = 16 (8 < 10)
    # and fails from 17 (2 * 3 + 5 = 11)
    model = CostModel(2.0, 1.0, 1.0, blocks=2, warps=2, lanes=4)
    assert light_degree(model, 10.0, 1000) == 16
    assert light_degree(model, 10.0, 12) == 12  # never above the largest degree
    assert light_degree(model, 0.0, 1000) == -1  # not even an empty frontier's bound is below 0
    for rdr in (3.0, 7.5, 40.0, 333.0):  # against a scan
        want = max((d for d in range(0, 5000) if 2 * (2 * -(-d // 8) + -(-d // 4)) < 2 * rdr), default=-1)
        assert light_degree(model, rdr, 5000) == want


def test_phi_on_a_hand_made_frontier():
    # 2 blocks of 2 warps of 4 lanes: slot q -> block (q // 2) % 2, warp q % 2
    model = CostModel(1.0, 1.0, 1.0, blocks=2, warps=2, lanes=4)
    out_deg = np.array([9, 1, 4, 0, 16, 3])
    in_deg = np.array([2, 8, 0, 5, 1, 3])
    # frontier order 4, 0, 2, 5, 1: slots 0..4 -> blocks 0, 0, 1, 1, 0 and warps 0, 1, 0, 1, 0
    rdw, rdr, sqw = phi_reference([4, 0, 2, 5, 1], out_deg, in_deg, {1, 3}, model)
    # block 0 holds 4, 0, 1: ceil(/8) = 2 + 2 + 1 = 5; warp 0 holds 4, 1: 4 + 1, warp 1 holds 0: 3
    # block 1 holds 2, 5: 1 + 1 = 2; its warps: 1 and 1 -> block 0 wins with 5 + 5 = 10
    assert rdw == 10
    # pull: vertex u in block (u // 2) % 2: block 0 = {0, 1, 4, 5}, block 1 = {2, 3}
    # block 0: ceil(d/8) 1 + 1 + 1 + 1 = 4, warps {0, 4}: 1 + 1 = 2, {1, 5}: 2 + 1 = 3 -> 7
    # block 1: 0 + 1 = 1, warps {2}: 0, {3}: 2 -> 3
    assert rdr == 7
    # receivers 1 (block 0, warp 1) and 3 (block 1, warp 1) add 1 + log2(8) = 4 and 1 + log2(4) = 3
    # block 0: 4 + 4 + max(2, 3 + 3) = 14; block 1: 1 + 4 + max(0, 2 + 3) = 10
    assert sqw == 14
    assert model.psi(rdw, rdr, sqw) == 10 - 7 - 14 and model.choose(rdw, rdr, sqw) == PUSH
    assert CostModel(3.0, 1.0, 1.0).choose(10, 7, 14) == PULL  # 30 - 21 > 0
    blk, wrp, phi = pull_static(in_deg, model)
    assert phi == rdr and blk.tolist() == [4, 1] and wrp.tolist() == [2, 3, 0, 2]


def test_hybrid_decisions_follow_psi_and_switch():
    g = graphs.barabasi_albert(3000, 6, seed=1, device="cpu")
    deg, tr = np.diff(g.indptr), g.transpose()
    model = CostModel(20.0, 1.0, 1.0, blocks=16)  # expensive atomics: pull wins on large frontiers
    static = pull_static(np.diff(tr.indptr), model)
    trace = np.zeros((500, 5))
    p, r = np.zeros(g.n), np.zeros(g.n)
    degrees = (light_degree(model, static[2], int(deg.max())), int(deg.max()))
    weights = np.array([20.0, 1.0, 1.0])
    it, _ = solve(
        g.indptr,
        g.indices,
        tr.indptr,
        tr.indices,
        deg,
        0,
        0.8,
        1e-9,
        HYBRID,
        10**6,
        weights,
        (16, 8, 32),
        static,
        degrees,
        p,
        r,
        trace,
        False,
        0,
    )
    chosen = trace[:it, 0].astype(int)
    for k in range(it):
        assert chosen[k] == model.choose(trace[k, 1], static[2], trace[k, 2])
    assert {PUSH, PULL} <= set(chosen.tolist())  # both models ran
    push = to_host(ppr(g, [0], method="push", r_max=1e-9))[0]
    np.testing.assert_allclose(p, push, atol=1e-14)


@pytest.mark.gpu
def test_gpu_hybrid_decides_on_the_device_as_psi_says():
    """The fused GPU solver picks each iteration's model itself (block 0 between iterations): every
    recorded choice is the cost model's on the statistics it recorded, both models run, and the
    answer equals pure push."""
    from operators.ppr.push_gpu import solver

    g = graphs.barabasi_albert(3000, 6, seed=1, device="gpu")
    model = CostModel(20.0, 1.0, 1.0, blocks=16)  # as the CPU test: pull wins on large frontiers
    rdr = pull_static(np.diff(to_host(g.transpose().indptr)), model)[2]
    run = solver(g, HYBRID, 0.8, 1e-9, np.float64, model, r_max=1e-9)
    p, it, models, residual = run([0], 10**6)
    trace = run.last_trace
    assert it == len(models) == len(trace) and residual[0] <= 1e-9 * (g.m + g.n)
    for k in range(it):
        assert trace[k, 0] == model.choose(trace[k, 1], rdr, trace[k, 2])
    assert set(models) == {"P", "L"} and (trace[:, 3] > 0).all()
    push = to_host(ppr(g, [0], method="push", r_max=1e-9))[0]
    np.testing.assert_allclose(to_host(p)[0], push, atol=1e-13)
    limited = solver(g, HYBRID, 0.8, 1e-9, np.float64, model, r_max=1e-9)([0], 3)
    assert limited[1] is None and len(limited[2]) == 3  # stopped by the iteration limit


@pytest.mark.gpu
def test_gpu_hybrid_bounds_match_the_cpu():
    """The GPU proves push from the same order-free bounds as the CPU: on a solve that pushes
    throughout, the frontier sizes, the rows decided by the bounds and those bounds agree with the
    CPU's trace; a second run repeats the first (the kernel left its counters cleared)."""
    from operators.ppr.push_gpu import solver

    g = graphs.rmat(11, seed=5, device="cpu")
    model = CostModel(2.3, 1.1, 1.0, blocks=8)
    it, want = _hybrid_trace(g, model, 1e-6)
    assert 0 < want[:, 4].sum() < it and (want[:, 0] == PUSH).all()
    run = solver(g.to("gpu"), HYBRID, 0.8, 1e-6, np.float64, model, r_max=1e-6)
    bounded = want[:, 4] == 1
    for _ in range(2):
        _, got, models, _ = run([0], 10**6)
        trace = run.last_trace
        assert got == it and models == "P" * it
        np.testing.assert_array_equal(trace[:, [0, 3, 4]], want[:, [0, 3, 4]])
        np.testing.assert_array_equal(trace[bounded, 1:3], want[bounded, 1:3])


@pytest.mark.gpu
def test_gpu_pull_statistics_match_the_cpu():
    """Weights under which the hybrid always pulls: every row's Phi_sqw (the vertices that received
    mass, counted by each block for its own vertices during the sweep) and frontier size equal the
    CPU's; a second run repeats the first."""
    from operators.ppr.push_gpu import solver

    g = graphs.rmat(11, seed=5, device="cpu")
    model = CostModel(1000.0, 0.0, 0.0, blocks=16)  # Psi = 1000 Phi_rdw >= 0: pull every time
    it, want = _hybrid_trace(g, model, 1e-7)
    assert (want[:, 0] == PULL).all() and it > 10
    run = solver(g.to("gpu"), HYBRID, 0.8, 1e-7, np.float64, model, r_max=1e-7)
    for _ in range(2):
        _, got, models, _ = run([0], 10**6)
        assert got == it and models == "L" * it
        np.testing.assert_array_equal(run.last_trace[:, [0, 2, 3]], want[:, [0, 2, 3]])


def test_half_grid_only_where_no_iteration_reads_many_edges():
    """A push iteration reads fewer than rows / tol out-edges (residues sum to at most 1 per row and
    an active vertex holds more than tol per out-edge); a pull sweep reads rows * m in-edges."""
    from operators.ppr.cost import SMALL_WORK, fit_grid

    model = CostModel()
    assert fit_grid(model, m=10**6, rows=1, tol=1e-6, mode=PUSH).blocks == model.blocks // 2
    assert fit_grid(model, m=10**6, rows=1, tol=1e-6, mode=PULL).blocks == model.blocks // 2
    assert fit_grid(model, m=10**8, rows=1, tol=1e-6, mode=HYBRID).blocks == model.blocks // 2
    assert fit_grid(model, m=10**8, rows=1, tol=1e-7, mode=PUSH) is model  # 10**7 edges may be read
    assert fit_grid(model, m=10**8, rows=1, tol=1e-6, mode=PULL) is model
    assert fit_grid(model, m=10**6, rows=8, tol=1e-6, mode=PUSH) is model  # a batch of 8 sources
    assert fit_grid(model, m=SMALL_WORK - 1, rows=1, tol=1e-9, mode=PUSH).blocks == model.blocks // 2
    assert fit_grid(CostModel(blocks=12), m=10, rows=1, tol=1e-6, mode=PUSH).blocks == 12  # 6: not % 4


def test_first_rdw_of_a_batch_follows_the_reference():
    """The hybrid's first decision: Phi_rdw of the sources at frontier positions 0, 1, ..."""
    from operators.ppr.cost import frontier_rdw

    rng = np.random.default_rng(0)
    for model in (CostModel(), CostModel(blocks=3, warps=2, lanes=4)):
        for ns in (1, 5, 9, 40):  # 40 sources wrap around the second model's 3 x 2 warps
            out_deg = rng.integers(0, 5000, ns)
            rdw, _, _ = phi_reference(range(ns), out_deg, np.zeros(ns), set(), model)
            assert frontier_rdw(out_deg, model) == rdw


@pytest.mark.gpu
def test_gpu_push_micro_benchmark_does_what_the_push_does():
    """The calibration's push kernel adds along every out-edge and lists each vertex the first time
    it receives, exactly once (what the solver's atomics with a read-back do)."""
    import cupy as cp

    from operators.ppr.calibrate import CALIBRATE

    g = graphs.rmat(12, seed=4, device="gpu")
    x, touched, count = cp.zeros(g.n), cp.full(g.n, -1, np.int32), cp.zeros(1, np.int32)
    kernel = CALIBRATE.get("gj_cal_atomic")
    kernel((64,), (256,), (g.indptr, g.indices, np.int32(g.n), x, touched, count))
    in_deg = np.bincount(g.indices.get(), minlength=g.n)
    np.testing.assert_array_equal(x.get(), in_deg)
    listed = touched[: int(count[0])].get()
    assert listed.size == np.unique(listed).size and set(listed) == set(np.flatnonzero(in_deg))


@pytest.mark.gpu
def test_gpu_cost_model_comes_from_its_cache_file_once(tmp_path, monkeypatch):
    import json

    import cupy as cp

    from operators.ppr.cost import _cache_file, _gpu_identity, cost_model

    monkeypatch.setenv("GRAPHJOBS_CACHE", str(tmp_path))
    name, sms = _gpu_identity(cp.cuda.Device().id)
    path = _cache_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"gpu": name, "l1": 3.0, "l2": 2.0, "l3": 1.5}))
    model = cost_model("gpu")
    assert (model.l1, model.l2, model.l3, model.blocks) == (3.0, 2.0, 1.5, 8 * sms)
    path.unlink()
    assert cost_model("gpu") is model  # read once per process and cache settings


@pytest.mark.parametrize(
    ("text", "warned"),
    [
        (None, None),
        ('{"gpu": "x", "l1": 3.0, "l2": 2.0, "l3": 1.5}', None),
        ('{"gpu": "x", "l1": 3.0, "l2": 2.0', "not a PPR cost cache"),  # cut short
        ('{"gpu": "x", "l1": 3.0, "l2": 2.0}', "not a PPR cost cache"),
        ('["l1", "l2", "l3"]', "not a PPR cost cache"),
        ('{"gpu": "x", "l1": 3.0, "l2": -2.0, "l3": NaN}', "not positive numbers"),
    ],
)
def test_a_damaged_cost_cache_is_measured_again_with_a_warning(tmp_path, text, warned):
    import warnings

    from operators.ppr.cost import _read_weights

    path = tmp_path / "ppr-cost.json"
    if text is not None:
        path.write_text(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _read_weights(path)
    if warned is None:
        assert not caught and got == (None if text is None else (3.0, 2.0, 1.5))
    else:
        assert got is None and len(caught) == 1 and warned in str(caught[0].message)
        assert str(path) in str(caught[0].message)
