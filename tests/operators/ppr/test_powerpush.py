"""PowerPush (``method="powerpush"``, the CPU's ``auto``): its modes, limits and corner cases against
exact PPR by a direct sparse solve (``test_accuracy._exact``) and against the hybrid."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import graphs
from graphs.errors import OptionError
from operators import ConvergenceError, ppr
from tests.operators.ppr.test_accuracy import _case, _exact
from tests.operators.ppr.test_ppr import _with_dangling

powerpush_cpu = importlib.import_module("operators.ppr.powerpush_cpu")


def test_auto_runs_powerpush_on_the_cpu():
    g, sources, exact = _case("rmat")
    auto, named = {}, {}
    x = ppr(g, sources, info=auto)
    y = ppr(g, sources, method="powerpush", info=named)
    np.testing.assert_array_equal(x, y)
    assert auto["models"] == named["models"]
    # the queue first (Q: n pops), then sweeps (S) once a share of the vertices is active
    assert all(set(m) <= {"Q", "S"} and m.startswith("Q") and "SQ" not in m for m in auto["models"])
    assert auto["iterations"] == [len(m) for m in auto["models"]]
    assert (np.abs(x - exact).sum(axis=1) <= np.array(auto["l1_bound"])).all()


def test_agrees_with_the_hybrid_within_tol():
    g, sources, exact = _case("wiki-Vote")
    for tol in (1e-4, 1e-7):
        a = ppr(g, sources, method="powerpush", tol=tol)
        b = ppr(g, sources, method="hybrid", tol=tol)
        assert np.abs(a - b).sum(axis=1).max() <= 2 * tol
        assert np.abs(a - exact).sum(axis=1).max() <= tol


def test_r_max_runs_one_epoch_and_reports_its_residue_mass():
    g, sources, exact = _case("rmat")
    for r_max in (1e-4, 1e-6):
        info: dict = {}
        x = ppr(g, sources, method="powerpush", r_max=r_max, info=info)
        err = np.abs(x - exact).sum(axis=1)
        np.testing.assert_allclose(info["residual"], err, rtol=1e-6, atol=1e-12)
        assert (np.array(info["residual"]) <= r_max * (g.m + g.n)).all()
    assert max(info["l1_bound"]) > 1e-6  # no global stop: coarser than the default tol here


def test_max_iter_raises_convergence_error():
    g, sources, _ = _case("wiki-Vote")
    info: dict = {}
    ppr(g, sources[:1], method="powerpush", tol=1e-8, info=info)
    need = info["iterations"][0]
    with pytest.raises(ConvergenceError, match=f"in {need - 1} iterations"):
        ppr(g, sources[:1], method="powerpush", tol=1e-8, max_iter=need - 1)
    ppr(g, sources[:1], method="powerpush", tol=1e-8, max_iter=need)


def test_a_tol_below_the_rounding_allowance_raises_convergence_error():
    g = _with_dangling()  # the allowance is at least epsilon times the pushes of the source
    with pytest.raises(ConvergenceError):
        ppr(g, [0], method="powerpush", tol=1e-17)


def test_a_source_without_out_edges():
    g = _with_dangling()  # 5 and 6 have no out-edges: their walks restart at themselves
    info: dict = {}
    x = ppr(g, [5, 6], method="powerpush", tol=1e-10, info=info)
    np.testing.assert_allclose(x, np.eye(g.n)[[5, 6]], atol=1e-10)
    assert max(info["l1_bound"]) <= 1e-10


def test_a_source_that_reaches_few_vertices():
    # a directed path 0 -> 1 -> 2 -> 3 in a graph of 50,000 vertices: the queue stays small
    n = 50_000
    g = graphs.from_edges(np.array([0, 1, 2, 10, 11]), np.array([1, 2, 3, 11, 12]), n=n, renumber=False)
    info: dict = {}
    x = ppr(g, [0], method="powerpush", tol=1e-9, info=info)[0]
    np.testing.assert_allclose(x, _exact(g, 0), atol=1e-12)
    assert np.abs(x - _exact(g, 0)).sum() <= 1e-9 and np.flatnonzero(x).tolist() == [0, 1, 2, 3]
    assert set(info["models"][0]) == {"Q"}  # never a sweep over all n vertices


def test_dtype_float32_casts_a_float64_solve_and_certifies_the_cast():
    g, sources, exact = _case("rmat")
    info: dict = {}
    x = ppr(g, sources, method="powerpush", tol=1e-4, dtype=np.float32, info=info)
    assert x.dtype == np.float32
    cast = np.array(info["l1_bound"]) - np.array(info["residual"])
    assert (cast >= 2.0**-24 / 2).all()  # the cast's rounding is in the bound
    assert (np.abs(x.astype(np.float64) - exact).sum(axis=1) <= np.array(info["l1_bound"])).all()


def test_threads_equal_one_source_at_a_time():
    g, sources, _ = _case("wiki-Vote")
    together = ppr(g, sources * 3, method="powerpush", tol=1e-6)  # on numba's threads (_collect)
    alone = np.concatenate([ppr(g, [s], method="powerpush", tol=1e-6) for s in sources])
    np.testing.assert_array_equal(together, np.tile(alone, (3, 1)))


@pytest.mark.gpu
def test_gpu_graphs_are_told_to_use_the_hybrid():
    g = _with_dangling().to("gpu")
    with pytest.raises(OptionError, match="powerpush runs on the CPU"):
        ppr(g, [0], method="powerpush")
