"""kPAR top-k PPR queries: accuracy against exact PPR, ablations, errors, streams, CPU/GPU agreement (the
index: ``test_ppr_index``; the GPU kernels step by step: ``test_topk_gpu``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import graphs
from graphs._device import to_host
from operators import InsufficientMemoryError, TopkTuning, build_ppr_index, ppr, topk_ppr
from operators.ppr.metrics import ndcg_at_k, precision_at_k
from tests.conftest import DEVICES, snap


def _accuracy(g, idx, sources, k, **kw):
    res = topk_ppr(idx, sources, k=k, **kw)
    exact = to_host(ppr(g, sources, method="power", tol=1e-10))
    prec, ndcg, good, total = [], [], 0, 0
    p = idx.params
    for i in range(len(sources)):
        ids = g.internal_ids(res.row(i)[0])
        prec.append(precision_at_k(exact[i], ids, k))
        ndcg.append(ndcg_at_k(exact[i], ids, k))
        d = res.delta[i]
        covered = exact[i][ids] >= max(d, math.sqrt(d * p.delta_min))
        err = np.abs(res.row(i)[1] - exact[i][ids]) <= p.epsilon * exact[i][ids]
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
        dict(tuning=TopkTuning(adaptive=False, high_irw=False, tiling=False, persistent=False, jump=False)),
        dict(tuning=TopkTuning(high_irw=False)),
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
    res = topk_ppr(build_ppr_index(g, seed=0), [0, 3.0], k=3)  # 3.0 is vertex 3
    assert res.sources.tolist() == [0, 3] and res.sources.dtype == np.int64
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
    # zero thresholds would push forever (delta_init) or divide by zero (delta_min, p_fail)
    with pytest.raises(ValueError, match=r"delta_init must be in \(0, 1\], got 0"):
        topk_ppr(idx, [1], k=5, delta_init=0)
    for name in ("delta_min", "p_fail"):
        with pytest.raises(ValueError, match=rf"{name} must be in \(0, 1\], got 0"):
            build_ppr_index(rmat13, **{name: 0.0})


def test_streams_are_checked(rmat13):
    idx = build_ppr_index(rmat13, seed=0)
    with pytest.raises(ValueError, match="needs the graph on the GPU"):
        topk_ppr(idx, [1, 2], k=5, streams=2)
    with pytest.raises(ValueError, match="streams must be an integer >= 1"):
        topk_ppr(idx, [1, 2], k=5, streams=0)
    assert topk_ppr(idx, [1, 2], k=5, streams=1).vertices.shape == (2, 5)


@pytest.mark.parametrize("device", DEVICES)
def test_forget_workspaces(rmat13, device):
    """The workspaces queries keep with the index (one per thread; on the GPU also the streams') go
    with ``forget_workspaces``; the next queries build new ones and answer alike."""
    idx = build_ppr_index(rmat13.to(device), seed=0)
    srcs = _sources(rmat13, 6)
    streams = 2 if device == "gpu" else 1
    first = topk_ppr(idx, srcs, k=20, streams=streams)
    kept = ("workspaces", "stream_pool") if device == "gpu" else ("workspaces",)
    assert all(idx.cache.get(key) for key in kept)
    idx.forget_workspaces()
    assert not any(key in idx.cache for key in (*kept, "round_constants")) and idx.cache.nbytes == 0
    again = topk_ppr(idx, srcs, k=20, streams=streams)
    same = [list(x) == list(y) for x, y in zip(again.vertices, first.vertices, strict=True)]
    assert np.mean(same) >= 5 / 6  # on the GPU atomic float adds may reorder near-ties
    np.testing.assert_allclose(again.ppr, first.ppr, rtol=1e-6)


def test_default_streams_by_graph_size(monkeypatch):
    """The default concurrency on the GPU: at most 4 below 2**23 vertices, at most 8 from there for k
    below 100, fewer when free memory holds fewer than two workspaces each; never more than the queries."""
    from types import SimpleNamespace

    from operators._gpu import streams as st

    monkeypatch.setattr(st, "free_memory", lambda device: 80 * 2**30)
    count = lambda n, queries=100: st.stream_count(SimpleNamespace(n=n, device="gpu"), queries, None, 81)  # noqa: E731
    assert [count(100), count(2**19), count(2**22), count(2**23 - 1), count(2**23), count(2**24)] == [
        4,
        4,
        4,
        4,
        8,
        8,
    ]
    assert count(2**24, queries=3) == 3
    monkeypatch.setattr(st, "free_memory", lambda device: 3 * 2 * 81 * 2**26)  # three workspaces at 2**26
    assert count(2**26) == 3 and count(2**22) == 4
    assert st.stream_count(SimpleNamespace(n=2**24, device="gpu"), 100, 6, 81) == 6  # as given
    g26 = SimpleNamespace(n=2**26, device="gpu")
    assert st.stream_count(g26, 100, None, 81, made=4) == 7  # kept workspaces need no memory
    # given streams whose workspaces do not fit: an error before any work, saying how many do
    with pytest.raises(
        InsufficientMemoryError, match=r"streams=7 \(a query workspace of 5.06 GiB each, 0 kept\)"
    ):
        st.stream_count(g26, 100, 7, 81)
    with pytest.raises(InsufficientMemoryError, match=r"at most streams=8 fit"):
        st.stream_count(g26, 100, 9, 81, made=2)
    assert st.stream_count(g26, 100, 8, 81, made=2) == 8 and st.stream_count(g26, 100, 6, 81) == 6
    assert st.stream_count(g26, 0, 7, 81) == 1  # one source: no other workspace
    monkeypatch.setattr(st, "free_memory", lambda device: 80 * 2**30)
    by_k = [
        st.stream_count(SimpleNamespace(n=2**24, device="gpu"), 100, None, 81, k) for k in (10, 99, 100, 1000)
    ]
    assert by_k == [8, 8, 4, 4]  # from k = 100 on, 4 at once there too


def test_a_later_batch_counts_the_workspaces_it_reuses_as_held(monkeypatch):
    """A batch's estimate holds the calling thread's workspace and the idle ones of earlier batches as
    allocated: only new workspaces must fit, and a workspace kept counts once."""
    import threading
    from types import SimpleNamespace

    from operators import topk
    from operators._gpu import memory as mem
    from operators._gpu import streams as st

    n = 2**26
    per = topk.WORKSPACE_BYTES * n
    free = 6 * per  # room for three new workspaces, twice over
    monkeypatch.setattr(st, "free_memory", lambda device: free)
    monkeypatch.setattr(mem, "free_memory", lambda device: free)
    g = SimpleNamespace(n=n, m=16 * n, device="gpu", has_derived=lambda name: False)
    first = SimpleNamespace(graph=g, nbytes=2**30, cache={})
    streams, est = topk.query_memory(first, 2000, k=100, refine=False)
    parts = dict(est.parts)
    assert streams == 3 and parts["workspaces kept"] == 0  # three a stream and the caller's: 4 new
    assert parts["in-edges build or new workspaces"] == 4 * per
    est.check("fewer streams")
    # what the first batch would have kept: the caller's workspace and three idle slots of the pool
    kept = {"workspaces": {threading.get_ident(): object()}, "stream_pool": SimpleNamespace(idle=3)}
    later = SimpleNamespace(graph=g, nbytes=2**30, cache=kept)
    streams, est = topk.query_memory(later, 2000, k=100, refine=False)
    parts = dict(est.parts)
    assert streams == 4  # the three kept and one new of the three that fit
    assert parts["workspaces kept"] == 4 * per and parts["in-edges build or new workspaces"] == per
    assert est.bytes > free  # all of it would not fit: the kept part is allocated already
    record = est.check("fewer streams")
    assert record["estimate_bytes"] == sum(parts.values())
    monkeypatch.setattr(mem, "free_memory", lambda device: per)  # less than the new workspace and more
    with pytest.raises(InsufficientMemoryError, match=r"top-100 PPR of 2,000 sources"):
        est.check("fewer streams")
    # a kept workspace counts once, however many the pool holds beyond this call's streams
    streams, est = topk.query_memory(later, 3, k=100, refine=False)
    assert streams == 2 and dict(est.parts)["workspaces kept"] == 3 * per
    assert dict(est.parts)["in-edges build or new workspaces"] == 0


def test_a_cpu_query_counts_the_constants_its_workspaces_share(rmat13):
    """On the CPU the estimate counts the per-index arrays every query reads (degrees, ones, omega), as
    many bytes as they take once made, and holds them as allocated on later calls."""
    from operators import topk

    idx = build_ppr_index(rmat13, seed=9)
    _, est = topk.query_memory(idx, 10, k=10, refine=True)
    assert "constants" not in est.held
    topk_ppr(idx, _sources(rmat13, 4), k=10)
    made = idx.cache.get("cpu_query_constants")
    assert dict(est.parts)["constants"] == sum(a.nbytes for a in made) > 0
    _, est = topk.query_memory(idx, 10, k=10, refine=True)
    assert "constants" in est.held


@pytest.mark.gpu
def test_gpu_streams_answer_as_one_at_a_time(rmat13):
    """Sources answered at once on 4 streams (workspaces kept for the next call) equal those in turn."""
    idx = build_ppr_index(rmat13.to("gpu"), seed=9)
    srcs = _sources(rmat13, 40)
    one = topk_ppr(idx, srcs, k=50, streams=1)
    for _ in range(2):
        many = topk_ppr(idx, srcs, k=50, streams=4)
        assert idx.cache.get("stream_pool").size == 4  # one workspace per stream, reused by the second call
        same = [list(x) == list(y) for x, y in zip(one.vertices, many.vertices, strict=True)]
        assert np.mean(same) >= 0.95  # atomic float adds may reorder near-ties
        np.testing.assert_allclose(many.ppr, one.ppr, rtol=1e-6)
        assert (many.rounds == one.rounds).mean() >= 0.95 and list(many.sources) == list(one.sources)


@pytest.mark.gpu
def test_gpu_batch_replays_rounds_as_graphs(rmat13, monkeypatch):
    """A batch captures its rounds as CUDA graphs and replays them, on one stream and with several
    queries in flight (each on its own workspace's stream), with the answers of rounds launched kernel by
    kernel; a configuration whose capture fails keeps launching directly, with the same answers."""
    import cupy as cp

    from operators.topk import gpu as tg
    from operators.topk.batch import workspace
    from operators.topk.gpu import graph as gr

    idx = build_ppr_index(rmat13.to("gpu"), seed=9)
    srcs = _sources(rmat13, 60)

    def check(got, want):
        same = [list(x) == list(y) for x, y in zip(want.vertices, got.vertices, strict=True)]
        assert np.mean(same) >= 0.95  # atomic float adds may reorder near-ties
        np.testing.assert_allclose(got.ppr, want.ppr, rtol=1e-6)
        assert (got.rounds == want.rounds).mean() >= 0.95

    def captured(works):  # the rounds' graphs (the refinement's have keys of their own)
        return [
            g
            for w in works
            for key, g in w.graph_replay.graphs.items()
            if key[0] != "refine" and g is not gr._CAPTURE and g is not gr._DIRECT
        ]

    def pooled():  # the workspaces of several queries in flight, made by the first such batch
        pool = idx.cache.get("stream_pool")
        return [w for _, w in (pool._free if pool else ())]

    direct = {}
    for k in (10, 100):
        monkeypatch.setattr(gr, "GRAPHS", False)
        base = len(captured([workspace(idx)]))  # (those of k = 10 stay kept while k = 100 runs)
        direct[k] = topk_ppr(idx, srcs, k=k, streams=1)
        assert len(captured([workspace(idx)])) == base
        monkeypatch.setattr(gr, "GRAPHS", True)
        check(topk_ppr(idx, srcs, k=k, streams=1), direct[k])
        before = len(captured([workspace(idx)]))
        assert before > base  # captured and replayed
        check(topk_ppr(idx, srcs, k=k, streams=1), direct[k])  # the second call replays them only
        assert len(captured([workspace(idx)])) == before
        check(topk_ppr(idx, srcs, k=k, streams=3), direct[k])
        assert len(pooled()) == 3 and captured(pooled())  # a graph is launched once captured
        check(topk_ppr(idx, srcs, k=k, streams=3), direct[k])  # and replayed by later calls
    check(topk_ppr(idx, srcs, k=10, streams=1), direct[10])  # replays after rounds of another k

    idx.forget_workspaces()
    seen = tg.list_seen

    def no_capture(*args):  # a launch that a capture cannot take
        if cp.cuda.get_current_stream().is_capturing():
            raise RuntimeError("not capturable")
        seen(*args)

    monkeypatch.setattr(tg, "list_seen", no_capture)
    check(topk_ppr(idx, srcs, k=10, streams=1), direct[10])
    assert not captured([workspace(idx)]) and gr._DIRECT in workspace(idx).graph_replay.graphs.values()


@pytest.mark.gpu
def test_gpu_single_source_calls_replay_rounds_as_graphs(rmat13, monkeypatch):
    """One query at a time (on the legacy default stream, which cannot capture) the rounds are captured on
    the workspace's own stream from the second call of a configuration on and replayed on the caller's,
    with the answers of rounds launched kernel by kernel; a capture interrupted by a BaseException (as by
    Ctrl-C) ends the capture before the exception goes on."""
    import cupy as cp

    from operators.topk import gpu as tg
    from operators.topk.batch import workspace
    from operators.topk.gpu import graph as gr

    idx = build_ppr_index(rmat13.to("gpu"), seed=9)
    srcs = _sources(rmat13, 12)
    assert cp.cuda.get_current_stream().ptr == 0
    monkeypatch.setattr(gr, "GRAPHS", False)
    direct = [topk_ppr(idx, [s], k=20) for s in srcs]
    assert not workspace(idx).graph_replay.graphs
    idx.forget_workspaces()
    monkeypatch.setattr(gr, "GRAPHS", True)
    for _ in range(2):  # the first pass runs, then captures, then replays; the second replays only
        got = [topk_ppr(idx, [s], k=20) for s in srcs]
        same = [list(g.vertices[0]) == list(d.vertices[0]) for g, d in zip(got, direct, strict=True)]
        assert np.mean(same) >= 0.9  # atomic float adds may reorder near-ties
        np.testing.assert_allclose([g.ppr[0] for g in got], [d.ppr[0] for d in direct], rtol=1e-6)
        assert np.mean([g.rounds[0] == d.rounds[0] for g, d in zip(got, direct, strict=True)]) >= 0.9
    ops = workspace(idx)
    assert ops.graph_replay.capture_stream is not None
    assert [g for g in ops.graph_replay.graphs.values() if g is not gr._CAPTURE and g is not gr._DIRECT]

    # interrupted while capturing (as by Ctrl-C): the stream leaves capture mode, later calls capture anew
    class Interrupt(BaseException):
        pass

    seen = tg.list_seen

    def interrupted(*args):
        if cp.cuda.get_current_stream().is_capturing():
            raise Interrupt
        seen(*args)

    idx.forget_workspaces()
    monkeypatch.setattr(tg, "list_seen", interrupted)
    with pytest.raises(Interrupt):
        for s in srcs:
            topk_ppr(idx, [s], k=20)
    ops = workspace(idx)
    replay = ops.graph_replay
    assert replay.capture_stream is not None and not replay.capture_stream.is_capturing()
    monkeypatch.setattr(tg, "list_seen", seen)
    got = [topk_ppr(idx, [s], k=20) for s in srcs]
    np.testing.assert_allclose([g.ppr[0] for g in got], [d.ppr[0] for d in direct], rtol=1e-6)
    assert [g for g in replay.graphs.values() if g is not gr._CAPTURE and g is not gr._DIRECT]


def test_cpu_batch_on_threads_answers_as_one_at_a_time(rmat13, monkeypatch):
    """On the CPU a batch answers Numba's thread count of sources at once, a workspace each (the spares
    kept for the next call), with the very answers of one source at a time, within the threads that other
    batches of the process left; an error in one source's query stops the others and reaches the caller."""
    import numba

    import operators._cpu_threads as threads
    from operators.topk import batch, cpu

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs Numba to have 2 threads or more")
    idx = build_ppr_index(rmat13, seed=9)
    srcs = _sources(rmat13, 40)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = topk_ppr(idx, srcs, k=50)
        assert "cpu_spares" not in idx.cache
        numba.set_num_threads(2)
        bytes_per_vertex = batch.CPU_WORKSPACE_BYTES
        assert threads.cpu_threads(idx.graph.n, bytes_per_vertex, 40) == 2
        assert threads.cpu_threads(idx.graph.n, bytes_per_vertex, 1) == 1
        for _ in range(2):
            two = topk_ppr(idx, srcs, k=50)
            assert len(idx.cache.get("cpu_spares")[1]) == 1  # one spare workspace, reused by the second call
            for field in ("vertices", "ppr", "rounds", "pushes", "candidates", "exact"):
                np.testing.assert_array_equal(getattr(two, field), getattr(one, field))

        def broken(self, *args, **kw):
            raise RuntimeError("a query failed")

        # threads that other batches of the process hold are not taken again: this one runs in turn
        monkeypatch.setattr(threads, "_TAKEN", [numba.config.NUMBA_NUM_THREADS - 1])
        monkeypatch.setattr(batch, "_answer_on_threads", None)  # would fail if called
        np.testing.assert_array_equal(topk_ppr(idx, srcs, k=50).vertices, one.vertices)
        monkeypatch.undo()

        monkeypatch.setattr(cpu.CPUQuery, "push", broken)
        with pytest.raises(RuntimeError, match="a query failed"):
            topk_ppr(idx, srcs, k=50)
        assert len(idx.cache.get("cpu_spares")[1]) == 1  # lent back after the failure
    finally:
        numba.set_num_threads(before)


@pytest.mark.gpu
def test_gpu_batch_sets_the_l2_fetch_granularity_and_restores_it(rmat13, monkeypatch):
    """The rounds of a GPU batch of at least L2_HINT_SOURCES sources run with 32 bytes fetched per L2
    miss (a process-wide hint), and the device's value comes back after the batch, also when a round
    raises; a smaller call leaves the hint alone."""
    import cupy as cp

    from operators._gpu.launch import L2_FETCH_LIMIT, l2_fetch_granularity
    from operators.topk import batch

    runtime = cp.cuda.runtime
    start = runtime.deviceGetLimit(L2_FETCH_LIMIT)
    runtime.deviceSetLimit(L2_FETCH_LIMIT, 128 if start != 128 else 64)
    try:
        other = runtime.deviceGetLimit(L2_FETCH_LIMIT)
        assert other != batch.L2_FETCH_BYTES
        idx = build_ppr_index(rmat13.to("gpu"), seed=9)
        seen = []
        inner = batch._answer_all

        def spy(*args):
            seen.append(runtime.deviceGetLimit(L2_FETCH_LIMIT))
            return inner(*args)

        monkeypatch.setattr(batch, "_answer_all", spy)
        srcs = _sources(rmat13, 8)
        topk_ppr(idx, srcs, k=10, streams=2)
        monkeypatch.setattr(batch, "L2_HINT_SOURCES", 1)
        topk_ppr(idx, srcs, k=10, streams=2)
        assert seen == [other, batch.L2_FETCH_BYTES] and runtime.deviceGetLimit(L2_FETCH_LIMIT) == other
        with pytest.raises(RuntimeError), l2_fetch_granularity(32):
            assert runtime.deviceGetLimit(L2_FETCH_LIMIT) == 32
            raise RuntimeError("a failed round")
        assert runtime.deviceGetLimit(L2_FETCH_LIMIT) == other
    finally:
        runtime.deviceSetLimit(L2_FETCH_LIMIT, start)


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
@pytest.mark.parametrize("probe", [True, False])
def test_small_closed_reach_is_answered_exactly(device, probe, monkeypatch):
    """Sources that reach few vertices (a self-loop only, no out-edge, a 4-vertex component with a
    double edge, a self-loop and a dangling vertex) get their exact PPR, not ten failed rounds and the
    fallback: all before any round, or, without the search before the rounds (``probe`` False), the
    third after one round; they list exactly the vertices they reach, and the slots after them are
    padding (vertex -1, PPR 0) that ``row`` and ``to_frame`` leave out."""
    import networkx as nx

    from operators.topk import exact as _topk_exact

    if not probe:  # every search gives up at its first out-edge
        monkeypatch.setattr(_topk_exact, "PROBE_SCAN", 0)

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
    assert res.rounds[:3].tolist() == [0, 0, 0 if probe else 1] and res.rounds[3] >= 1
    nxg = nx.MultiDiGraph(list(zip(s_all.tolist(), d_all.tolist(), strict=True)))
    for i, s in enumerate(sources[:3]):
        exact = nx.pagerank(nxg, alpha=0.8, personalization={s: 1}, tol=1e-14, max_iter=2000)
        reach = sorted(v for v, x in exact.items() if x > 1e-12)  # the rest decay from uniform
        assert reach == sorted(res.vertices[i, : len(reach)].tolist())
        np.testing.assert_allclose(
            res.ppr[i, : len(reach)], [exact[v] for v in res.vertices[i, : len(reach)]], atol=1e-10
        )
        assert res.counts[i] == len(reach) < k and (res.ppr[i, : len(reach)] > 0).all()
        assert (np.diff(res.ppr[i]) <= 0).all() and (res.ppr[i, len(reach) :] == 0).all()
        assert (res.vertices[i, len(reach) :] == -1).all()
        np.testing.assert_array_equal(res.row(i)[0], res.vertices[i, : len(reach)])
    assert res.counts[3] == k
    frame = res.to_frame()
    assert len(frame) == res.counts.sum() and (frame.ppr > 0).all() and (frame.vertex >= 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_sources_without_out_edges_are_answered_at_once(device, monkeypatch):
    """A source without out-edges to other vertices has PPR 1 at itself (NetworkX sends a dangling
    vertex's mass back to it) and 0 elsewhere: it is answered without a round, in any place of a batch,
    labels kept, k up to n."""
    import networkx as nx

    from operators.topk import exact as _topk_exact

    monkeypatch.setattr(_topk_exact, "PROBE_SCAN", 0)  # the other sources (small graph) take rounds
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 40, 200), rng.integers(0, 60, 200)  # vertices 40..59: no out-edges
    src = np.concatenate([src, [40, 40, 41, 41, 42]])  # then 40 has self-loops only; 41 and 42 leave
    dst = np.concatenate([dst, [40, 40, 41, 3, 3]])
    labels = np.arange(60) * 7 + 1000
    g = graphs.from_edges(labels[src], labels[dst]).to(device)
    idx = build_ppr_index(g, seed=0)
    deg = np.diff(to_host(g.indptr))
    ids = to_host(g.ids)
    dangling = ids[deg == 0]
    first, last, loops = dangling.min(), dangling.max(), labels[40]
    for k in (5, g.n):
        res = topk_ppr(idx, [first, labels[41], last, labels[42], loops], k=k)
        alone = topk_ppr(idx, labels[41:43], k=k)
        np.testing.assert_array_equal(res.vertices[[1, 3]], alone.vertices)
        assert res.rounds.tolist()[::2] == [0, 0, 0] and (res.rounds[1::2] >= 1).all()
        assert res.exact[::2].all() and (res.pushes[::2] == 0).all() and (res.pushes[1::2] > 0).all()
        for row, s in ((0, first), (2, last), (4, loops)):
            assert res.vertices[row, 0] == s and res.ppr[row, 0] == 1.0 and (res.ppr[row, 1:] == 0).all()
            assert res.counts[row] == 1 and (res.vertices[row, 1:] == -1).all()
            assert res.row(row)[0].tolist() == [s]
        assert (res.counts[1::2] > 1).all()
    nxg = nx.MultiDiGraph(list(zip(labels[src].tolist(), labels[dst].tolist(), strict=True)))
    nxg.add_nodes_from(labels.tolist())
    for s in (last, loops):
        exact = nx.pagerank(nxg, alpha=0.8, personalization={int(s): 1}, tol=1e-14, max_iter=2000)
        assert exact[int(s)] == pytest.approx(1.0) and max(v for u, v in exact.items() if u != s) < 1e-10


def test_delta_jumps_skip_rounds_not_accuracy():
    """Halving delta as often as a failed round's bounds need takes fewer rounds, same top k."""
    g = snap("wiki-Vote")
    idx = build_ppr_index(g, seed=0)
    srcs = _sources(g, 8, seed=4)
    one = topk_ppr(idx, srcs, k=200, tuning=TopkTuning(jump=False))
    many = topk_ppr(idx, srcs, k=200)
    assert (many.rounds <= one.rounds).all() and many.rounds.sum() < one.rounds.sum()
    # a jump lands at delta_init / 2^j, never above the delta that one halving a round reaches
    assert (many.delta <= one.delta * (1 + 1e-12)).all()
    exact = to_host(ppr(g, srcs, method="power", tol=1e-10))
    for res in (one, many):
        prec = [precision_at_k(exact[i], g.internal_ids(res.row(i)[0]), 200) for i in range(len(srcs))]
        assert np.mean(prec) >= 0.95


def test_query_state_is_kept_in_the_declared_cache_and_forgotten_on_request(rmat13):
    import pickle

    idx = build_ppr_index(rmat13, seed=3)
    assert "workspaces" not in idx.cache and idx.cache.nbytes == 0
    first = topk_ppr(idx, [1, 2, 3], k=10)
    assert "workspaces" in idx.cache and "cpu_query_constants" in idx.cache
    assert idx.cache.nbytes >= 8 * idx.graph.n  # at least the constants' out-degrees, float64
    with pytest.raises(KeyError, match="not a declared query cache key"):
        idx.cache.get("anything")
    copy = pickle.loads(pickle.dumps(idx))
    assert copy.cache.nbytes == 0 and idx.cache.nbytes > 0  # the cache is not part of the value
    idx.forget_workspaces()
    assert idx.cache.nbytes == 0 and "workspaces" not in idx.cache
    again = topk_ppr(idx, [1, 2, 3], k=10)
    np.testing.assert_array_equal(first.vertices, again.vertices)
    np.testing.assert_array_equal(first.ppr, again.ppr)
