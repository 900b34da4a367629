"""Single-source PPR by push, pull, hybrid and Monte Carlo: NetworkX and power-method oracles,
invariants, batches, limits and the solver's workspace (the cost model: ``test_ppr_cost``)."""

from __future__ import annotations

import importlib
import math

import networkx as nx
import numpy as np
import pytest

import graphs
from graphs._device import to_host
from graphs.errors import OptionError
from operators import ConvergenceError, ppr
from operators.ppr.cost import HYBRID, PULL, CostModel, pull_static
from tests.conftest import DEVICES, snap, to_networkx
from tests.operators.ppr.test_ppr import _with_dangling

ppr_module = importlib.import_module("operators.ppr")  # the module (operators.ppr is the function)

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
    x = to_host(ppr(g, labels, method="hybrid", tol=1e-7, info=info))
    l1 = np.abs(x - exact).sum(axis=1)
    assert (l1 <= np.asarray(info["residual"]) + 1e-9).all() and l1.max() <= 1e-7
    auto = {}  # powerpush on the CPU, power on the GPU
    l1 = np.abs(to_host(ppr(g, labels, tol=1e-7, info=auto)) - exact).sum(axis=1)
    assert (l1 <= np.asarray(auto["l1_bound"]) * (1 + 1e-9) + 1e-15).all() and max(auto["l1_bound"]) <= 1e-7
    top = to_host(ppr(g, labels, tol=1e-9, topk=20))[0]  # label ranking of the top 20 agrees
    order = np.argsort(-exact, axis=1, kind="stable")[:, :20]
    assert (np.isin(top, to_host(g.ids)[order]).mean(axis=1) >= 0.95).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", [None, 30_000])
def test_montecarlo_within_its_standard_deviation(device, chunk, monkeypatch):
    if chunk is not None:  # walks drawn in chunks, as a small tol needs (1e-10: 10^10 walks)
        monkeypatch.setattr(ppr_module, "MC_CHUNK", chunk)
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
        order[dense[i, order] == 0] = -1  # only vertices the source reaches are listed
        assert labels[i].tolist() == order.tolist()
        np.testing.assert_allclose(values[i], np.where(order >= 0, dense[i, order], 0))
    info = {}
    labels, values = ppr(g, [6], tol=1e-12, topk=50, info=info)  # more than n: every vertex it reaches
    reached = int((dense[1] > 0).sum())
    assert labels.shape == (1, g.n) and reached < g.n and info["counts"] == [reached]
    assert labels[0, :reached].tolist() == np.lexsort((np.arange(g.n), -dense[1]))[:reached].tolist()
    assert (
        (values[0, :reached] > 0).all()
        and (labels[0, reached:] == -1).all()
        and (values[0, reached:] == 0).all()
    )
    f32 = ppr(g, [0], tol=1e-4, dtype=np.float32)
    assert f32.dtype == np.float32 and np.abs(to_host(f32)[0] - dense[0]).sum() <= 1e-4
    with pytest.raises(OptionError, match=r"float32 cannot certify an L1 error below 0\.0001"):
        ppr(g, [0], tol=1e-5, dtype=np.float32)


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


@pytest.mark.parametrize("method", ITERATIVE)
def test_cpu_sources_on_threads_equal_one_at_a_time(method, monkeypatch):
    """On the CPU push, pull and the hybrid solve Numba's thread count of sources at once (pull sweeps
    then in each solve's own thread): the same rows, top entries and per-source info, in source order;
    a source that fails stops the batch with its error."""
    import numba

    import operators._cpu_threads as threads

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs Numba to have 2 threads or more")
    g = graphs.rmat(10, seed=4)
    labels = np.concatenate([_batch_sources(g), _batch_sources(g)[::-1]])
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one: dict = {}
        alone = ppr(g, labels, method=method, r_max=1e-8, info=one)
        top_alone = ppr(g, labels, method=method, r_max=1e-8, topk=7)
        numba.set_num_threads(2)
        calls = []
        monkeypatch.setattr(
            ppr_module,
            "for_each_on_threads",
            lambda *a: calls.append(len(a[1])) or threads.for_each_on_threads(*a),
        )
        two: dict = {}
        np.testing.assert_array_equal(ppr(g, labels, method=method, r_max=1e-8, info=two), alone)
        top = ppr(g, labels, method=method, r_max=1e-8, topk=7)
        assert calls == [2, 2]
        np.testing.assert_array_equal(top[0], top_alone[0])
        np.testing.assert_array_equal(top[1], top_alone[1])
        for key in ("iterations", "models", "residual"):
            assert two[key] == one[key]
        with pytest.raises(ConvergenceError):
            ppr(g, labels, method=method, tol=1e-12, max_iter=2)
    finally:
        numba.set_num_threads(before)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ITERATIVE)
def test_gpu_batches_equal_one_source_at_a_time(method):
    """Rows of a residue matrix do not interact: each source gets the reserves and residue it gets
    alone, and a batch runs as many iterations as its slowest source."""
    g = graphs.rmat(10, seed=4, device="gpu")
    labels = _batch_sources(g)
    one: dict = {}
    alone = to_host(ppr(g, labels, method=method, r_max=1e-8, block=1, info=one))
    exact = to_host(ppr(g, labels, method="power", tol=1e-13))
    for block in (2, 5):
        info: dict = {}
        x = to_host(ppr(g, labels, method=method, r_max=1e-8, block=block, info=info))
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
    from operators.ppr.push_gpu import solver

    g = graphs.barabasi_albert(3000, 6, seed=1, device="gpu")
    model = CostModel(20.0, 1.0, 1.0, blocks=16)
    rdr = pull_static(np.diff(to_host(g.transpose().indptr)), model)[2]
    run = solver(g, HYBRID, 0.8, 1e-9, np.float64, model, batch=3, r_max=1e-9)
    p, it, models, residual = run([0, 7, 2999], 10**6)
    trace = run.last_trace
    assert p.shape == (3, g.n) and it == len(models) == len(trace) and trace[0, 3] == 3
    for k in range(it):
        assert trace[k, 0] == model.choose(trace[k, 1], 3 * rdr, trace[k, 2])
    assert set(models) == {"P", "L"} and (residual <= 1e-9 * (g.m + g.n)).all()
    push = to_host(ppr(g, [0, 7, 2999], method="push", r_max=1e-9, block=1))
    np.testing.assert_allclose(to_host(p), push, atol=1e-13)
    with pytest.raises(ValueError, match="1 to 3 sources"):
        run([0, 1, 2, 3], 10)


@pytest.mark.gpu
def test_gpu_batch_limits():
    g = _with_dangling().to("gpu")
    with pytest.raises(ConvergenceError):
        ppr(g, [0, 4, 6], method="pull", tol=1e-12, max_iter=2, block=3)
    from operators.ppr.cost import cost_model
    from operators.ppr.push_plan import MAX_ITEMS, row_stride

    cost = cost_model("gpu")  # passed: by default a graph this small runs half the grid (fit_grid)
    too_many = MAX_ITEMS // row_stride(g.n, cost) + 1
    with pytest.raises(ValueError, match="int32 item limit"):
        ppr(g, np.zeros(too_many, dtype=np.int64), method="push", block=too_many, cost=cost)


def test_batch_size_rule():
    from operators.ppr.push_plan import ITEM_BYTES, batch_size, row_stride

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
    assert batch_size(7115, np.float64, model, mode=PULL, limit_bytes=2**40) == 124  # 2**20 residues
    assert batch_size(75_879, np.float64, model, mode=PULL, limit_bytes=2**40) == 13
    assert batch_size(10**6, np.float64, model, mode=PULL, limit_bytes=2**40) == 1
    assert batch_size(75_879, np.float64, model, dense=True, limit_bytes=2**40) == 13  # as pull
    assert batch_size(10**6, np.float64, model, dense=True, limit_bytes=2**40) == 1


def test_big_lists_hold_each_large_vertex_once_in_its_blocks_slice():
    """The pull sweep leaves vertices of in-degree >= lanes * warps to their block: block i's list holds
    exactly the large vertices of its slots ((v // warps) % blocks == i), in increasing order."""
    from operators.ppr.push_plan import big_lists

    model = CostModel(blocks=12)
    rng = np.random.default_rng(3)
    in_deg = rng.choice([0, 1, 255, 256, 300, 4000], size=5000, p=[0.5, 0.3, 0.05, 0.05, 0.05, 0.05])
    ptr, vertices = big_lists(in_deg, model)
    assert ptr.dtype == vertices.dtype == np.int32 and ptr[0] == 0 and ptr[-1] == len(vertices)
    assert sorted(vertices.tolist()) == np.flatnonzero(in_deg >= 256).tolist()
    for i in range(model.blocks):
        mine = vertices[ptr[i] : ptr[i + 1]]
        assert ((mine // model.warps) % model.blocks == i).all() and (np.diff(mine) > 0).all()
    empty_ptr, empty = big_lists(np.zeros(10, np.int64), model)
    assert len(empty) == 0 and (empty_ptr == 0).all() and len(empty_ptr) == model.blocks + 1


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
    """ppr keeps one idle workspace per graph: the next call with the same dtype and grid reuses it,
    whatever its model and tol, and calls from concurrent threads each run in their own (answers as
    one at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    g = graphs.rmat(12, seed=2, device="gpu")
    labels = to_host(g.ids)[::97][:24]
    one = {int(s): to_host(ppr(g, [s], method="hybrid", r_max=1e-8))[0] for s in labels}
    idle = g.derived("ppr_solver_idle", lambda _: None)[1]
    ppr(g, [labels[0]], method="hybrid", r_max=1e-8)
    assert g.derived("ppr_solver_idle", lambda _: None)[1][1] is idle[1]  # the same workspace again
    ppr(g, [labels[0]], method="push", r_max=1e-8)  # the same grid (fit_grid): the same workspace
    assert g.derived("ppr_solver_idle", lambda _: None)[1][1] is idle[1]
    ppr(g, [labels[0]], method="hybrid", r_max=1e-8, dtype=np.float32)
    assert g.derived("ppr_solver_idle", lambda _: None)[1][1] is not idle[1]  # another dtype: another
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: to_host(ppr(g, [s], method="hybrid", r_max=1e-8))[0], labels))
    for s, x in zip(labels, got, strict=True):
        np.testing.assert_allclose(x, one[int(s)], atol=1e-12)
        assert x.sum() > 0.5


@pytest.mark.gpu
def test_gpu_models_and_tolerances_share_one_workspace():
    """Calls alternating push, pull and the hybrid at two tolerances on one grid run on the graph's
    one idle workspace and answer as each model alone on a workspace of its own."""
    from operators.ppr import MODES
    from operators.ppr.push_gpu import solver

    g = graphs.rmat(11, seed=5, device="gpu")
    model = CostModel(2.3, 1.1, 1.0, blocks=8)  # given: every call on the same grid
    used = set()
    for method, tol in [
        ("push", 1e-6),
        ("pull", 1e-6),
        ("hybrid", 1e-8),
        ("push", 1e-8),
        ("hybrid", 1e-6),
        ("pull", 1e-8),
        ("hybrid", 1e-9),
    ]:
        got = ppr(g, [3, 40], method=method, tol=tol, cost=model, block=2)
        used.add(id(g.derived("ppr_solver_idle", lambda _: None)[1][1]))
        alone = solver(g, MODES[method], 0.8, tol, np.float64, model, batch=2)([3, 40], 10**6)
        np.testing.assert_allclose(to_host(got), to_host(alone[0]), atol=1e-12)
    assert len(used) == 1


@pytest.mark.parametrize("how", ["error", "interrupt"])
def test_threads_stop_after_their_item_on_an_error_or_an_interrupt(how):
    """An error in one thread of a CPU batch, or an interrupt (Ctrl-C) of the calling thread while the
    batch runs, stops the other threads after the item each is on, instead of leaving them to finish."""
    import os
    import signal
    import threading
    import time

    from operators._cpu_threads import for_each_on_threads

    done, started, sent = [], threading.Event(), threading.Event()

    def work(item):
        started.set()
        time.sleep(0.1)
        done.append(item)

    def stop(item):
        started.wait()
        if how == "error":
            raise RuntimeError("one item failed")
        if not sent.is_set():  # once: the calling thread waits on the others meanwhile
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)
        work(item)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # also where a shell ignores it
    try:
        with pytest.raises(RuntimeError if how == "error" else KeyboardInterrupt):
            for_each_on_threads(range(1000), [work, work, stop])
    finally:
        signal.signal(signal.SIGINT, before)
    assert len(done) < 30  # of 1,000: about 30 a second, stopped within 0.1 s


@pytest.mark.parametrize("method", ["push", "pull", "hybrid", "powerpush", "power"])
def test_a_tol_below_float64_rounding_names_the_bound_reached_and_a_larger_tol_certifies(method):
    g = graphs.rmat(10, seed=3, device="cpu")
    with pytest.raises(ConvergenceError, match="with no max_iter it stopped at its finest step") as e:
        ppr(g, [1], method=method, tol=1e-20)
    assert "9223372036854775807" not in str(e.value)
    # the error reported is the certified bound (residue plus rounding), not the residue alone: every
    # step's rounding counts at least float64's epsilon, and ten times the bound reached certifies
    assert e.value.error >= np.finfo(np.float64).eps
    info: dict = {}
    ppr(g, [1], method=method, tol=10 * e.value.error, info=info)
    assert info["l1_bound"][0] <= 10 * e.value.error
