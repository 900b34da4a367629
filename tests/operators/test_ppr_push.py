"""Single-source PPR by push, pull, hybrid and Monte Carlo: NetworkX and power-method oracles,
invariants, the cost model on hand-made frontiers, and the hybrid's decisions."""

from __future__ import annotations

import importlib
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphs
from graphs._device import to_host
from operators import ConvergenceError, ppr
from operators._ppr_cost import PULL, PUSH, CostModel, light_degree, phi_reference, pull_static
from operators._ppr_push_cpu import HYBRID, rdw_bound, solve
from operators.ppr import _push_reference
from tests.conftest import DEVICES, snap, to_networkx
from tests.operators.test_ppr import _with_dangling

ITERATIVE = ["push", "pull", "hybrid"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", [*ITERATIVE, "power"])
def test_methods_match_networkx(device, method):
    g = _with_dangling()
    nxg = to_networkx(g)
    info = {}
    x = to_host(ppr(g.to(device), [0, 5, 7], method=method, tol=1e-12, info=info))
    for i, s in enumerate([0, 5, 7]):
        want = nx.pagerank(nxg, alpha=0.8, personalization={s: 1}, tol=1e-15, max_iter=10_000)
        err = np.abs(x[i] - [want[v] for v in range(g.n)]).sum()
        assert err < 1e-10
        if method != "power":  # the L1 error is the residue left, which tol bounds
            assert info["residual"][i] <= 1e-12 * (g.m + g.n)
            assert err <= info["residual"][i] + 1e-13


@pytest.mark.parametrize("device", DEVICES)
def test_push_pull_hybrid_agree_on_rmat_with_error_bound(device):
    g = graphs.rmat(11, seed=5, device=device)
    sources = [int(v) for v in to_host(g.ids)[[0, 17, 900]]] if g.ids is not None else [0, 17, 900]
    exact = to_host(ppr(g, sources, method="power", tol=1e-12))
    got = {}
    for method in ITERATIVE:
        info = {}
        got[method] = to_host(ppr(g, sources, method=method, tol=1e-7, info=info))
        x = got[method]
        assert (x >= 0).all()
        residual = np.asarray(info["residual"])
        assert (residual <= 1e-7 * (g.m + g.n)).all()
        np.testing.assert_allclose(x.sum(axis=1) + residual, 1.0, atol=1e-12)  # mass is conserved
        assert (np.abs(x - exact).sum(axis=1) <= residual + 1e-9).all()
        assert (x <= exact + 1e-12).all()  # push underestimates: the residues are still to spread
        assert all(len(m) == it for m, it in zip(info["models"], info["iterations"], strict=True))
    np.testing.assert_allclose(got["push"], got["pull"], atol=1e-12)
    np.testing.assert_allclose(got["push"], got["hybrid"], atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_hybrid_on_snap_graph(device):
    g = snap("wiki-Vote", directed=True).to(device)
    labels = to_host(g.ids)[[3, 1000, 5000]]
    exact = to_host(ppr(g, labels, method="power", tol=1e-12))
    info = {}
    x = to_host(ppr(g, labels, tol=1e-7, info=info))
    l1 = np.abs(x - exact).sum(axis=1)
    assert (l1 <= np.asarray(info["residual"]) + 1e-9).all() and l1.max() < 1e-2
    top = to_host(ppr(g, labels, tol=1e-9, topk=20))[0]  # label ranking of the top 20 agrees
    order = np.argsort(-exact, axis=1, kind="stable")[:, :20]
    assert (np.isin(top, to_host(g.ids)[order]).mean(axis=1) >= 0.95).all()


def test_solver_statistics_follow_the_reference():
    """Push mode: Phi_rdw of each active list and Phi_sqw of the previous receivers, recomputed."""
    g = graphs.rmat(9, seed=2, device="cpu")
    model = CostModel(blocks=3, warps=2, lanes=4)
    deg, tr = np.diff(g.indptr), g.transpose()
    ideg = np.diff(tr.indptr)
    trace = np.zeros((200, 5))
    p, r = np.zeros(g.n), np.zeros(g.n)
    it, out = solve(g.indptr, g.indices, tr.indptr, tr.indices, deg, 0, 0.8, 1e-6, PUSH, 10**6,
                    np.array([2.3, 1.1, 1.0]), (3, 2, 4), pull_static(ideg, model), (-1, 0), p, r,
                    trace)  # fmt: skip
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
    trace = np.zeros((500, 5))
    weights, layout = np.array([model.l1, model.l2, model.l3]), (model.blocks, model.warps, model.lanes)
    static = pull_static(np.diff(tr.indptr), model)
    degrees = (light_degree(model, static[2], int(deg.max())), int(deg.max()))
    it, out = solve(g.indptr, g.indices, tr.indptr, tr.indices, deg, 0, 0.8, tol, HYBRID, 10**6, weights,
                    layout, static, degrees, np.zeros(g.n), np.zeros(g.n), trace)  # fmt: skip
    assert out == 0
    return it, trace[:it]


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
@given(st.lists(st.integers(0, 700), max_size=80), st.integers(-1, 800), st.integers(1, 6), st.integers(1, 4),
       st.integers(1, 8))  # fmt: skip
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
    it, _ = solve(g.indptr, g.indices, tr.indptr, tr.indices, deg, 0, 0.8, 1e-9, HYBRID, 10**6,
                  np.array([20.0, 1.0, 1.0]), (16, 8, 32), static, degrees, p, r, trace)  # fmt: skip
    chosen = trace[:it, 0].astype(int)
    for k in range(it):
        assert chosen[k] == model.choose(trace[k, 1], static[2], trace[k, 2])
    assert {PUSH, PULL} <= set(chosen.tolist())  # both models ran
    push = to_host(ppr(g, [0], method="push", tol=1e-9))[0]
    np.testing.assert_allclose(p, push, atol=1e-14)


@pytest.mark.gpu
def test_gpu_hybrid_decides_on_the_device_as_psi_says():
    """The fused GPU solver picks each iteration's model itself (block 0 between iterations): every
    recorded choice is the cost model's on the statistics it recorded, both models run, and the
    answer equals pure push."""
    from operators._ppr_push_gpu import solver

    g = graphs.barabasi_albert(3000, 6, seed=1, device="gpu")
    model = CostModel(20.0, 1.0, 1.0, blocks=16)  # as the CPU test: pull wins on large frontiers
    rdr = pull_static(np.diff(to_host(g.transpose().indptr)), model)[2]
    run = solver(g, HYBRID, 0.8, 1e-9, np.float64, model)
    p, it, models, residual = run([0], 10**6)
    trace = run.last_trace
    assert it == len(models) == len(trace) and residual[0] <= 1e-9 * (g.m + g.n)
    for k in range(it):
        assert trace[k, 0] == model.choose(trace[k, 1], rdr, trace[k, 2])
    assert set(models) == {"P", "L"} and (trace[:, 3] > 0).all()
    push = to_host(ppr(g, [0], method="push", tol=1e-9))[0]
    np.testing.assert_allclose(to_host(p)[0], push, atol=1e-13)
    limited = solver(g, HYBRID, 0.8, 1e-9, np.float64, model)([0], 3)
    assert limited[1] is None and len(limited[2]) == 3  # stopped by the iteration limit


@pytest.mark.gpu
def test_gpu_hybrid_bounds_match_the_cpu():
    """The GPU proves push from the same order-free bounds as the CPU: on a solve that pushes
    throughout, the frontier sizes, the rows decided by the bounds and those bounds agree with the
    CPU's trace; a second run repeats the first (the kernel left its counters cleared)."""
    from operators._ppr_push_gpu import solver

    g = graphs.rmat(11, seed=5, device="cpu")
    model = CostModel(2.3, 1.1, 1.0, blocks=8)
    it, want = _hybrid_trace(g, model, 1e-6)
    assert 0 < want[:, 4].sum() < it and (want[:, 0] == PUSH).all()
    run = solver(g.to("gpu"), HYBRID, 0.8, 1e-6, np.float64, model)
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
    from operators._ppr_push_gpu import solver

    g = graphs.rmat(11, seed=5, device="cpu")
    model = CostModel(1000.0, 0.0, 0.0, blocks=16)  # Psi = 1000 Phi_rdw >= 0: pull every time
    it, want = _hybrid_trace(g, model, 1e-7)
    assert (want[:, 0] == PULL).all() and it > 10
    run = solver(g.to("gpu"), HYBRID, 0.8, 1e-7, np.float64, model)
    for _ in range(2):
        _, got, models, _ = run([0], 10**6)
        assert got == it and models == "L" * it
        np.testing.assert_array_equal(run.last_trace[:, [0, 2, 3]], want[:, [0, 2, 3]])


@pytest.mark.parametrize("device", DEVICES)
def test_montecarlo_within_its_standard_deviation(device):
    g = graphs.rmat(8, seed=9, device=device)
    s = int(to_host(g.ids)[4]) if g.ids is not None else 4
    exact = to_host(ppr(g, [s], method="power", tol=1e-12))[0]
    tol = 1e-5  # 100,000 walks
    a = to_host(ppr(g, [s], method="montecarlo", tol=tol, seed=1))[0]
    assert a.sum() == pytest.approx(1.0)
    sd = np.sqrt(exact * (1 - exact) * tol)
    assert (np.abs(a - exact) <= 6 * sd + 3 * tol).all()
    z = (a - exact)[exact > 1e-3] / sd[exact > 1e-3]
    assert abs(z.mean()) < 4 / math.sqrt(z.size) + 0.2 and 0.5 < z.std() < 1.5
    np.testing.assert_array_equal(a, to_host(ppr(g, [s], method="montecarlo", tol=tol, seed=1))[0])
    assert not np.array_equal(a, to_host(ppr(g, [s], method="montecarlo", tol=tol, seed=2))[0])


@pytest.mark.parametrize("device", DEVICES)
def test_topk_and_dtype(device):
    g = _with_dangling().to(device)
    dense = to_host(ppr(g, [0, 6], tol=1e-12))
    labels, values = ppr(g, [0, 6], tol=1e-12, topk=3)
    assert labels.shape == values.shape == (2, 3)
    for i in range(2):
        order = np.lexsort((np.arange(g.n), -dense[i]))[:3]
        assert labels[i].tolist() == order.tolist()
        np.testing.assert_allclose(values[i], dense[i, order])
    labels, values = ppr(g, [6], tol=1e-12, topk=50)  # more than n: every vertex, zeros last by id
    assert labels.shape == (1, g.n) and values[0, -1] == 0.0
    f32 = ppr(g, [0], tol=1e-9, dtype=np.float32)
    assert f32.dtype == np.float32
    np.testing.assert_allclose(to_host(f32)[0], dense[0], atol=1e-6)


def test_errors():
    g = _with_dangling()
    with pytest.raises(ValueError, match="method"):
        ppr(g, [0], method="magic")
    with pytest.raises(ValueError, match="dtype"):
        ppr(g, [0], dtype=np.int32)
    with pytest.raises(ValueError, match="topk"):
        ppr(g, [0], topk=0)
    with pytest.raises(ValueError, match="tol"):
        ppr(g, [0], tol=0)
    with pytest.raises(KeyError, match="not in the graph"):
        ppr(g, [42], method="push")
    with pytest.raises(ConvergenceError):
        ppr(g, [0], method="pull", tol=1e-12, max_iter=2)


def _batch_sources(g):
    """Labels of three sources with out-edges, a dangling one and a repeat (a partial last batch)."""
    deg = np.diff(to_host(g.indptr))
    busy, dangling = np.flatnonzero(deg > 0), np.flatnonzero(deg == 0)
    ids = [busy[0], dangling[0], busy[len(busy) // 2], busy[0], busy[-1]]
    return to_host(g.ids)[ids] if g.ids is not None else np.array(ids)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ITERATIVE)
def test_gpu_batches_equal_one_source_at_a_time(method):
    """Rows of a residue matrix do not interact: each source gets the reserves and residue it gets
    alone, and a batch runs as many iterations as its slowest source."""
    g = graphs.rmat(10, seed=4, device="gpu")
    labels = _batch_sources(g)
    one: dict = {}
    alone = to_host(ppr(g, labels, method=method, tol=1e-8, block=1, info=one))
    exact = to_host(ppr(g, labels, method="power", tol=1e-13))
    for block in (2, 5):
        info: dict = {}
        x = to_host(ppr(g, labels, method=method, tol=1e-8, block=block, info=info))
        np.testing.assert_allclose(x, alone, rtol=0, atol=1e-13)
        np.testing.assert_allclose(info["residual"], one["residual"], rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(x.sum(axis=1) + info["residual"], 1.0, atol=1e-12)
        assert (np.abs(x - exact).sum(axis=1) <= np.asarray(info["residual"]) + 1e-10).all()
        for lo in range(0, len(labels), block):
            slowest = max(one["iterations"][lo : lo + block])
            if method != "hybrid":  # the hybrid may pick other models for a batch than for its sources
                assert info["iterations"][lo : lo + block] == [slowest] * len(labels[lo : lo + block])
    assert one["iterations"][1] != one["iterations"][0]  # the batch really waits for its slowest source


@pytest.mark.gpu
def test_gpu_batch_hybrid_decides_on_all_rows():
    """In a batch the statistics count items of every row: pull's fixed terms are ns times one row's,
    each recorded choice is Psi's on the recorded statistics, and the rows equal push's."""
    from operators._ppr_push_gpu import solver

    g = graphs.barabasi_albert(3000, 6, seed=1, device="gpu")
    model = CostModel(20.0, 1.0, 1.0, blocks=16)
    rdr = pull_static(np.diff(to_host(g.transpose().indptr)), model)[2]
    run = solver(g, HYBRID, 0.8, 1e-9, np.float64, model, batch=3)
    p, it, models, residual = run([0, 7, 2999], 10**6)
    trace = run.last_trace
    assert p.shape == (3, g.n) and it == len(models) == len(trace) and trace[0, 3] == 3
    for k in range(it):
        assert trace[k, 0] == model.choose(trace[k, 1], 3 * rdr, trace[k, 2])
    assert set(models) == {"P", "L"} and (residual <= 1e-9 * (g.m + g.n)).all()
    push = to_host(ppr(g, [0, 7, 2999], method="push", tol=1e-9, block=1))
    np.testing.assert_allclose(to_host(p), push, atol=1e-13)
    with pytest.raises(ValueError, match="1 to 3 sources"):
        run([0, 1, 2, 3], 10)


@pytest.mark.gpu
def test_gpu_batch_limits():
    g = _with_dangling().to("gpu")
    with pytest.raises(ConvergenceError):
        ppr(g, [0, 4, 6], method="pull", tol=1e-12, max_iter=2, block=3)
    from operators._ppr_cost import cost_model
    from operators._ppr_push_plan import MAX_ITEMS, row_stride

    cost = cost_model("gpu")  # passed: by default a graph this small runs half the grid (fit_grid)
    too_many = MAX_ITEMS // row_stride(g.n, cost) + 1
    with pytest.raises(ValueError, match="int32 item limit"):
        ppr(g, np.zeros(too_many, dtype=np.int64), method="push", block=too_many, cost=cost)


def test_half_grid_only_where_no_iteration_reads_many_edges():
    """A push iteration reads fewer than rows / tol out-edges (residues sum to at most 1 per row and
    an active vertex holds more than tol per out-edge); a pull sweep reads rows * m in-edges."""
    from operators._ppr_cost import SMALL_WORK, fit_grid

    model = CostModel()
    assert fit_grid(model, m=10**6, rows=1, tol=1e-6, mode=PUSH).blocks == model.blocks // 2
    assert fit_grid(model, m=10**6, rows=1, tol=1e-6, mode=PULL).blocks == model.blocks // 2
    assert fit_grid(model, m=10**8, rows=1, tol=1e-6, mode=HYBRID).blocks == model.blocks // 2
    assert fit_grid(model, m=10**8, rows=1, tol=1e-7, mode=PUSH) is model  # 10**7 edges may be read
    assert fit_grid(model, m=10**8, rows=1, tol=1e-6, mode=PULL) is model
    assert fit_grid(model, m=10**6, rows=8, tol=1e-6, mode=PUSH) is model  # a batch of 8 sources
    assert fit_grid(model, m=SMALL_WORK - 1, rows=1, tol=1e-9, mode=PUSH).blocks == model.blocks // 2
    assert fit_grid(CostModel(blocks=12), m=10, rows=1, tol=1e-6, mode=PUSH).blocks == 12  # 6: not % 4


def test_batch_size_rule():
    from operators._ppr_push_plan import ITEM_BYTES, batch_size, row_stride

    model = CostModel()
    assert row_stride(1, model) == row_stride(8448, model) == 8448 and row_stride(8449, model) == 16896
    stride = row_stride(10**6, model)
    assert stride % (model.warps * model.blocks) == 0 and stride >= 10**6
    fits3 = 4 * 3 * ITEM_BYTES[np.float64] * stride  # a quarter of it holds 3 rows
    assert batch_size(10**6, np.float64, model, limit_bytes=fits3) == 3
    assert batch_size(10**6, np.float32, model, limit_bytes=fits3) == 4  # 32 instead of 52 bytes
    assert batch_size(10**6, np.float64, model, limit_bytes=1) == 1
    assert batch_size(1000, np.float64, model, limit_bytes=2**40) == 128
    assert batch_size(2**24, np.float64, model, limit_bytes=2**40) == 127  # 128 rows pass 2**31 items
    assert batch_size(2**28, np.float32, model, limit_bytes=2**50) == 7  # int32 items: 7 rows of 2**28
    assert batch_size(7115, np.float64, model, mode=PULL, limit_bytes=2**40) == 15  # 2**17 residues
    assert batch_size(75_879, np.float64, model, mode=PULL, limit_bytes=2**40) == 1


def test_first_rdw_of_a_batch_follows_the_reference():
    """The hybrid's first decision: Phi_rdw of the sources at frontier positions 0, 1, ..."""
    from operators._ppr_cost import frontier_rdw

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

    from graphs._device import get_kernel
    from operators._ppr_calibrate import CALIBRATE_KERNEL

    g = graphs.rmat(12, seed=4, device="gpu")
    x, touched, count = cp.zeros(g.n), cp.full(g.n, -1, np.int32), cp.zeros(1, np.int32)
    kernel = get_kernel(CALIBRATE_KERNEL, "gj_cal_atomic")
    kernel((64,), (256,), (g.indptr, g.indices, np.int32(g.n), x, touched, count))
    in_deg = np.bincount(g.indices.get(), minlength=g.n)
    np.testing.assert_array_equal(x.get(), in_deg)
    listed = touched[: int(count[0])].get()
    assert listed.size == np.unique(listed).size and set(listed) == set(np.flatnonzero(in_deg))


@pytest.mark.gpu
def test_gpu_cost_model_comes_from_its_cache_file_once(tmp_path, monkeypatch):
    import json

    import cupy as cp

    from operators._ppr_cost import _cache_file, _gpu_identity, cost_model

    monkeypatch.setenv("GRAPHJOBS_CACHE", str(tmp_path))
    name, sms = _gpu_identity(cp.cuda.Device().id)
    path = _cache_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"gpu": name, "l1": 3.0, "l2": 2.0, "l3": 1.5}))
    model = cost_model("gpu")
    assert (model.l1, model.l2, model.l3, model.blocks) == (3.0, 2.0, 1.5, 8 * sms)
    path.unlink()
    assert cost_model("gpu") is model  # read once per process and cache settings


def test_a_dense_result_that_cannot_fit_fails_before_any_work(monkeypatch):
    module = importlib.import_module("operators.ppr")  # the package exports the function under this name

    class NoRoom:
        @staticmethod
        def empty(shape, dtype):
            raise MemoryError("out of memory")

    monkeypatch.setattr(module, "array_module", lambda a: NoRoom)
    info: dict = {}
    with pytest.raises(MemoryError, match=r"2 sources x 8 vertices .* pass topk="):
        ppr(_with_dangling(), [0, 1], method="push", info=info)
    assert info == {}  # nothing ran


@pytest.mark.gpu
def test_gpu_solver_workspace_is_reused_and_private_to_a_run():
    """ppr keeps one idle workspace per graph: the next call with the same settings reuses it, and
    calls from concurrent threads each run in their own (answers as one at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    g = graphs.rmat(12, seed=2, device="gpu")
    labels = to_host(g.ids)[::97][:24]
    one = {int(s): to_host(ppr(g, [s], method="hybrid", tol=1e-8))[0] for s in labels}
    idle = g.derived("ppr_solver_idle", lambda _: None)[1]
    ppr(g, [labels[0]], method="hybrid", tol=1e-8)
    assert g.derived("ppr_solver_idle", lambda _: None)[1][1] is idle[1]  # the same workspace again
    ppr(g, [labels[0]], method="push", tol=1e-8)
    assert g.derived("ppr_solver_idle", lambda _: None)[1][1] is not idle[1]  # other settings: another
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: to_host(ppr(g, [s], method="hybrid", tol=1e-8))[0], labels))
    for s, x in zip(labels, got, strict=True):
        np.testing.assert_allclose(x, one[int(s)], atol=1e-12)
        assert x.sum() > 0.5
