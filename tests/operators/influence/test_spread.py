"""Diffusion models and Monte Carlo spread: weighted-cascade, trivalency and LT probabilities, bad
weights named with their vertex or edge, and closed-form spreads of a hand-made graph."""

from __future__ import annotations

import math

import numpy as np
import pytest

import graphs
from graphs._device import to_host
from graphs.errors import OptionError
from operators import influence_maximization, influence_spread
from operators.influence.model import diffusion_model
from tests.conftest import DEVICES

Z = 5.0  # z-score bound of the statistical tests


def diamond():
    """0->1 (0.6), 0->2 (0.3), 1->3 (0.5), 2->3 (0.4), and 4 alone."""
    src, dst = np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3])
    w = np.array([0.6, 0.3, 0.5, 0.4])
    return graphs.from_edges(src, dst, w, n=5, renumber=False)


def test_weighted_cascade_and_trivalency_probabilities():
    g = graphs.rmat(8, seed=3, device="cpu")
    dm = diffusion_model(g, "IC", "wc", 0)
    indeg = np.diff(dm.rev.indptr)
    rows = np.repeat(np.arange(g.n), indeg)
    np.testing.assert_allclose(dm.rev.p, 1.0 / indeg[rows], rtol=1e-6)
    # the forward view carries the same probability on the same edge
    _, dst, _ = g.edges()
    np.testing.assert_allclose(dm.fwd.p, 1.0 / indeg[dst], rtol=1e-6)
    lt = diffusion_model(g, "LT", "wc", 0)
    np.testing.assert_allclose(np.bincount(rows, weights=lt.rev.p), (indeg > 0).astype(float), rtol=1e-5)
    tri = diffusion_model(g, "IC", "trivalency", 5).rev.p
    assert set(np.unique(tri).tolist()) <= {np.float32(v) for v in (0.1, 0.01, 0.001)}
    counts = np.unique(tri, return_counts=True)[1]
    assert counts.size == 3
    assert np.all(np.abs(counts - g.m / 3) < Z * math.sqrt(g.m * 2 / 9))
    assert np.array_equal(tri, diffusion_model(g, "IC", "trivalency", 5).rev.p)
    assert not np.array_equal(tri, diffusion_model(g, "IC", "trivalency", 6).rev.p)


@pytest.mark.parametrize("device", DEVICES)
def test_in_edge_view_matches_a_per_edge_reference(device, monkeypatch):
    """Every in-edge row lists its sources in forward-edge order (repeated edges too), with the edge's own
    weight; LT intervals are the row's running sums; the forward view carries the same values on the
    same edges. The GPU build's sort keys are made in chunks of 7 edges here, so that chunking is
    covered (the CPU build takes its order from a counting sort instead)."""
    import operators.influence.model as model

    monkeypatch.setattr(model, "_KEY_CHUNK", 7)
    rng = np.random.default_rng(4)
    n, m = 40, 300
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    src[:20], dst[:20] = 3, 5  # a repeated edge
    indeg = np.bincount(dst, minlength=n)
    w = rng.random(m) / indeg[dst]  # in-weights sum to at most 1 (LT)
    g = graphs.from_edges(src, dst, w, n=n, renumber=False).to(device)
    f_src, f_dst, f_w = (np.asarray(to_host(a)) for a in g.edges())
    rows = {v: [] for v in range(n)}
    for e in range(g.m):  # forward edge order
        rows[int(f_dst[e])].append(e)
    order = [e for v in range(n) for e in rows[v]]
    lo_of = np.zeros(g.m)
    for v in range(n):
        np.put(lo_of, rows[v], np.concatenate([[0.0], np.cumsum(f_w[rows[v]])[:-1]]))
    for kind in ("IC", "LT"):
        dm = diffusion_model(g, kind, "graph", 0)
        rev, fwd = dm.rev, dm.fwd
        assert np.array_equal(
            to_host(rev.indptr), np.concatenate([[0], np.cumsum(np.bincount(f_dst, minlength=n))])
        )
        assert np.array_equal(to_host(rev.indices), f_src[order])
        assert np.array_equal(to_host(rev.p), f_w[order].astype(np.float32))
        assert np.array_equal(to_host(fwd.p), f_w.astype(np.float32))
        want_lo = lo_of if kind == "LT" else np.zeros(g.m)
        np.testing.assert_allclose(to_host(rev.lo), want_lo[order], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(to_host(fwd.lo), want_lo, rtol=1e-6, atol=1e-7)


def test_bad_weights_are_rejected_with_the_vertex():
    g = diamond()
    src, dst = np.array([0, 1, 2]), np.array([2, 2, 0])
    heavy = graphs.from_edges(src, dst, np.array([0.7, 0.6, 0.5]), n=3, renumber=False)
    with pytest.raises(ValueError, match=r"vertex 2 sums to 1\.3"):
        influence_maximization(heavy, 1, model="LT", weights="graph")
    over = graphs.from_edges(np.array([0]), np.array([1]), np.array([1.5]), n=2, renumber=False)
    with pytest.raises(ValueError, match=r"edge 0 -> 1 has weight 1\.5"):
        influence_spread(over, [0], weights="graph")
    with pytest.raises(ValueError, match="weighted graph"):
        influence_maximization(graphs.toy.chain(), 1, weights="graph")
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        influence_maximization(g, 1, weights=1.2)
    with pytest.raises(ValueError, match="model must be one of"):
        influence_maximization(g, 1, model="SIR")
    with pytest.raises(ValueError, match="k must be"):
        influence_maximization(g, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("model", "expected"), [("IC", 1 + 0.6 + 0.3 + 0.384), ("LT", 1 + 0.6 + 0.3 + 0.42)])
def test_spread_of_hand_checked_graph(device, model, expected):
    # IC: P(3) = 1 - (1 - 0.6*0.5)(1 - 0.3*0.4); LT: 3 picks 1 (0.5) or 2 (0.4), active with 0.6, 0.3
    g = diamond().to(device)
    info = {}
    got = influence_spread(g, [0], model=model, weights="graph", n_sim=100_000, seed=3, info=info)
    assert abs(got - expected) < Z * info["stderr"]
    assert influence_spread(g, [0, 4], model=model, weights="graph", n_sim=20_000) > got + 0.9
    both = influence_spread(g, [0, 0], model=model, weights="graph", n_sim=100_000, seed=3)
    assert both == got  # a repeated seed changes nothing, not even the random worlds


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["IC", "LT"])
def test_simulations_are_numbered_so_any_split_draws_the_same_ones(device, model):
    """Simulation s is world s of the stream whatever the call: ``first`` continues where a call ended,
    on the GPU a warp or a block of 512 threads runs one (the same cascade either way), as on the CPU."""
    from operators.influence import cpu as _im_cpu

    g = graphs.rmat(11, seed=5, device="cpu")
    seeds, rounds_of = np.array([3, 9, 40, 41]), np.array([0, 0, 1, 1])
    fwd = diffusion_model(g, model, "wc", 0).fwd
    whole = _im_cpu.cascades(fwd, model == "LT", 77, seeds, rounds_of, 2, 300)
    split = [
        _im_cpu.cascades(fwd, model == "LT", 77, seeds, rounds_of, 2, c, first=f)
        for f, c in ((0, 120), (120, 180))
    ]
    assert np.array_equal(np.concatenate(split), whole) and whole.max() > 4
    if device == "gpu":
        from operators.influence import gpu as _im_gpu

        gfwd = diffusion_model(g.to("gpu"), model, "wc", 0).fwd
        for block in (False, True):
            lt = model == "LT"
            got = [
                to_host(_im_gpu.cascades(gfwd, lt, 77, seeds, rounds_of, 2, c, first=f, block=block))
                for f, c in ((0, 120), (120, 180))
            ]
            assert np.array_equal(np.concatenate(got), whole), block


@pytest.mark.parametrize("device", DEVICES)
def test_a_relative_precision_stops_the_simulations_once_it_is_reached(device):
    """With rtol the simulations double from FIRST_BATCH until the standard error is within rtol of the
    mean: the answer is that of exactly as many simulations, and a spread with no variance stops first."""
    from operators.influence.spread import FIRST_BATCH

    g = graphs.barabasi_albert(3000, 3, seed=2).to(device)
    info: dict = {}
    got = influence_spread(g, [0, 1, 2], n_sim=100_000, seed=4, rtol=0.01, info=info)
    ran = info["n_sim"]
    assert ran in [FIRST_BATCH * 2**i for i in range(12)] and FIRST_BATCH < ran < 100_000
    assert info["stderr"] <= 0.01 * got
    half: dict = {}
    influence_spread(g, [0, 1, 2], n_sim=ran // 2, seed=4, info=half)
    assert half["stderr"] > 0.01 * influence_spread(g, [0, 1, 2], n_sim=ran // 2, seed=4)  # not enough
    exact: dict = {}
    assert influence_spread(g, [0, 1, 2], n_sim=ran, seed=4, info=exact) == got and exact["n_sim"] == ran
    fixed: dict = {}
    assert influence_spread(diamond().to(device), [4], weights="graph", rtol=1e-6, info=fixed) == 1.0
    assert fixed["n_sim"] == FIRST_BATCH and fixed["stderr"] == 0.0
    with pytest.raises(OptionError, match="rtol"):
        influence_spread(g, [0], rtol=1.5)


def test_progress_counts_batches_of_the_same_simulations():
    """With progress the simulations run in doubling batches: the same answer as one batch, ``done``
    never decreasing, the last report complete (an early stop by rtol reports its own total)."""
    from operators.influence.spread import FIRST_BATCH

    g = graphs.barabasi_albert(2000, 3, seed=2)
    calls: list = []
    got = influence_spread(g, [0, 5], n_sim=1000, seed=3, progress=lambda *a: calls.append(a))
    assert got == influence_spread(g, [0, 5], n_sim=1000, seed=3)
    assert [c[0] for c in calls] == [FIRST_BATCH, 200, 400, 800, 1000] and {c[1:] for c in calls} == {
        (1000, "simulations")
    }
    calls.clear()
    info: dict = {}
    influence_spread(
        g, [0, 5], n_sim=10**6, seed=3, rtol=0.02, info=info, progress=lambda *a: calls.append(a)
    )
    assert calls[-1] == (info["n_sim"], info["n_sim"], "simulations") and info["n_sim"] < 10**6
    assert all(c[1] == 10**6 for c in calls[:-1]) and [c[0] for c in calls] == sorted(c[0] for c in calls)
