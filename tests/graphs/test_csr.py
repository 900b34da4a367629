"""CSRGraph: invariants, immutability, transpose and degrees against SciPy, tokens, devices."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from dask.base import tokenize

import graphs
from graphs import CSRGraph, from_edges
from graphs._device import to_host
from tests.conftest import DEVICES


def random_edges(n=200, m=1500, seed=0, weighted=False):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    w = rng.uniform(0.1, 2.0, m) if weighted else None
    return src, dst, w


def dense(g: CSRGraph) -> np.ndarray:
    return g.to_scipy().toarray()


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("n", [300, 3])
def test_in_edge_order_on_the_host_is_a_stable_sort_by_destination(threads, n):
    """Each thread places one range of destinations: the result is the serial stable order whatever the
    number of threads (n = 3 with one row of in-edges: more threads than such rows where the machine
    has 2 or more cores), with weights carried along."""
    import numba as nb

    from graphs._build import in_edge_order_cpu, transpose_csr

    src, dst, w = random_edges(n=n, m=4000, seed=3, weighted=True)
    dst[: 1500 if n > 3 else None] = min(7, n - 2)  # a hub, and rows with no in-edges
    g = from_edges(src, dst, w, n=n, renumber=False)
    order = np.argsort(g.indices, kind="stable")
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    before = nb.get_num_threads()
    nb.set_num_threads(min(threads, nb.config.NUMBA_NUM_THREADS))
    try:
        ptr, sources, eids = in_edge_order_cpu(g.indptr, g.indices, g.n)
        tptr, tidx, tw = transpose_csr(g.indptr, g.indices, g.weights, g.n)
    finally:
        nb.set_num_threads(before)
    assert np.array_equal(ptr, np.concatenate([[0], np.cumsum(np.bincount(g.indices, minlength=g.n))]))
    assert np.array_equal(eids, order) and np.array_equal(sources, rows[order])
    assert (
        np.array_equal(tptr, ptr)
        and np.array_equal(tidx, rows[order])
        and np.array_equal(tw, g.weights[order])
    )
    assert sp.csr_matrix((tw, tidx, tptr), shape=(g.n, g.n)).toarray().T.tolist() == dense(g).tolist()


def test_from_edges_matches_scipy_coo_including_duplicates():
    src, dst, w = random_edges(weighted=True)
    g = from_edges(src, dst, w, n=200, renumber=False)
    ref = sp.coo_array((w.astype(np.float32), (src, dst)), shape=(200, 200)).toarray()  # sums duplicates
    np.testing.assert_allclose(dense(g), ref, rtol=1e-6)
    assert g.m == 1500 and g.indptr.dtype == np.int64 and g.indices.dtype == np.int32
    for u in range(g.n):  # rows sorted
        row = g.indices[g.indptr[u] : g.indptr[u + 1]]
        assert np.all(np.diff(row) >= 0)


def test_dedupe_keeps_first_weight_and_self_loop_filter():
    g = from_edges([0, 0, 1, 1, 2], [1, 1, 1, 2, 2], [5.0, 7.0, 1.0, 2.0, 3.0], renumber=False, dedupe=True)
    assert g.m == 4 and g.weights[0] == 5.0
    h = from_edges([0, 0, 1, 1, 2], [1, 1, 1, 2, 2], renumber=False, self_loops=False)
    assert h.m == 3 and sorted(zip(*[a.tolist() for a in h.edges()[:2]], strict=True)) == [
        (0, 1),
        (0, 1),
        (1, 2),
    ]


def test_undirected_stores_both_directions_and_loops_once():
    g = from_edges([0, 1, 2], [1, 2, 2], renumber=False, directed=False)
    assert not g.directed and g.m == 5
    a = dense(g)
    np.testing.assert_array_equal(a, a.T)
    assert a[2, 2] == 1 and g.transpose() is g


def test_labels_of_internal_ids_and_of_an_unlabelled_graph_without_making_its_ids():
    g = from_edges(np.array([1000, 7, 7]), np.array([7, 99, 1000]))
    np.testing.assert_array_equal(g.labels_of(np.array([2, 0])), [1000, 7])
    h = from_edges(np.array(["x", "y"], dtype=object), np.array(["y", "z"], dtype=object))
    assert h.labels_of([2, 0]).tolist() == ["z", "x"]
    bare = from_edges(np.array([0, 1]), np.array([1, 2]), renumber=False)
    got = bare.labels_of([2, 0])
    assert got.dtype == np.int64 and got.tolist() == [2, 0] and got.tolist() == bare.ids[[2, 0]].tolist()
    fresh = from_edges(np.array([0, 1]), np.array([1, 2]), renumber=False)
    assert fresh.labels_of(1).item() == 1 and "ids" not in fresh._cache  # no 0..n-1 array made


def test_renumbering_integers_sorted_and_strings_by_first_appearance():
    g = from_edges(np.array([1000, 7, 7]), np.array([7, 99, 1000]))
    assert g.ids.tolist() == [7, 99, 1000] and g.n == 3
    h = from_edges(np.array(["x", "y"], dtype=object), np.array(["y", "z"], dtype=object))
    assert h.ids.tolist() == ["x", "y", "z"]
    np.testing.assert_array_equal(h.internal_ids(["z", "x"]), [2, 0])
    with pytest.raises(KeyError, match="not in the graph"):
        h.internal_ids(["nope"])
    wide = from_edges(np.array([-(2**62), 2**62]), np.array([2**62, 5]))  # sparse range: the sort path
    assert wide.ids.tolist() == [-(2**62), 5, 2**62]
    # integer labels given as objects (as ppr passes them) take the integer path; others are looked up
    np.testing.assert_array_equal(g.internal_ids(np.array([1000, np.int64(7)], dtype=object)), [2, 0])
    for bad in ([2**70], [True], ["7"], [99.5]):
        with pytest.raises(KeyError, match="not in the graph"):
            g.internal_ids(np.array(bad, dtype=object))


def test_an_unlabelled_graph_takes_whole_numbers_and_names_what_it_cannot():
    g = CSRGraph(np.zeros(6, dtype=np.int64), np.zeros(0, dtype=np.int32))  # vertices 0..4
    assert g.internal_ids([]).tolist() == [] and g.internal_ids(np.array([], dtype=object)).tolist() == []
    assert g.internal_ids([3.0, 1]).tolist() == [3, 1]  # 3.0 == 3, as NetworkX finds it
    assert g.internal_ids(np.array([4, 2.0], dtype=object)).tolist() == [4, 2]
    mixed = np.array([0, "x"], dtype=object)
    for bad, shown in (
        ([1.5], [1.5]),
        (["3"], ["3"]),
        ([True], [True]),
        (mixed, ["x"]),
        ([np.nan], None),
        ([0, 2**70], [2**70]),
        ([5, 0, -1], [5, -1]),
        ([np.inf, 1.0], [np.inf]),
        (np.array([2.0, 3.25], dtype=np.float32), [3.25]),
        ([1e30, 3.0], [1e30]),
    ):
        with pytest.raises(graphs.LabelError) as info, warnings.catch_warnings():
            warnings.simplefilter("error")  # a float too large for int64 is reported, not warned about
            g.internal_ids(bad)
        if shown is not None:
            assert info.value.labels == shown
        assert isinstance(info.value, KeyError) and "'" not in str(info.value)[:1]
    message = "2 label(s) not in the graph, e.g. [5, -1]"
    err = pickle.loads(pickle.dumps(graphs.LabelError(message, [5, -1], 2)))
    assert (err.labels, err.count, str(err)) == ([5, -1], 2, message)


def test_integer_labels_in_any_order_are_found_by_binary_search():
    ids = np.array([50, -3, 8, 2**40, 0], dtype=np.int64)  # internal id i has label ids[i]
    g = CSRGraph(np.zeros(6, dtype=np.int64), np.zeros(0, dtype=np.int32), ids=ids)
    for query in (
        [8, 50, 0, 2**40, -3],
        np.array([0, 8], dtype=np.int32),
        np.array([8], dtype=np.uint64),
        np.array([2**40, 50], dtype=object),
        8,
    ):
        want = [ids.tolist().index(v) for v in np.atleast_1d(query).tolist()]
        np.testing.assert_array_equal(g.internal_ids(query), want)
    for bad in ([7], [51], [-4], [2**41], np.array([2**64 - 1], dtype=np.uint64)):
        with pytest.raises(KeyError, match="1 label"):
            g.internal_ids(bad)
    with pytest.raises(KeyError, match="2 label"):
        g.internal_ids([50, 1, 8, -1])
    empty = CSRGraph(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), ids=np.zeros(0, np.int64))
    with pytest.raises(KeyError, match="not in the graph"):
        empty.internal_ids([0])


def test_constructor_validation():
    ok = np.array([0, 1, 2], dtype=np.int64)
    with pytest.raises(TypeError, match="int64"):
        CSRGraph(ok.astype(np.int32), np.array([1, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="lie in"):
        CSRGraph(ok, np.array([1, 5], dtype=np.int32))
    with pytest.raises(ValueError, match="non-decreasing"):
        CSRGraph(np.array([0, 2, 1, 2], dtype=np.int64), np.array([1, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="finite"):
        CSRGraph(ok, np.array([1, 0], dtype=np.int32), np.array([1.0, np.nan], dtype=np.float32))
    with pytest.raises(graphs.GraphFormatError, match="weights\\[1\\]"):
        from_edges([0, 1], [1, 0], [1.0, -2.0])
    with pytest.raises(graphs.GraphFormatError, match="out of range"):
        from_edges([0, 5], [1, 0], n=3, renumber=False)


def test_immutable():
    g = graphs.toy.chain(4)
    with pytest.raises(AttributeError, match="immutable"):
        g.n = 3
    with pytest.raises(ValueError, match="read-only"):
        g.indices[0] = 2


def test_threads_asking_at_once_share_one_transpose_and_one_derived_value(monkeypatch):
    """A job's chunks run on threads: each asking for the transpose (or a derived plan) while another
    builds it must wait for that one, not build and hold a copy of its own."""
    import threading
    import time

    from graphs import _build

    g = graphs.rmat(6, seed=1, device="cpu")
    built, slow = [], _build.transpose_csr

    def transpose_csr(*args):
        built.append(1)
        time.sleep(0.2)  # the other threads ask meanwhile
        return slow(*args)

    monkeypatch.setattr(_build, "transpose_csr", transpose_csr)
    made = []

    def plan(graph):
        made.append(1)
        time.sleep(0.2)
        return object()

    got = []
    threads = [
        threading.Thread(target=lambda: got.append((g.transpose(), g.derived("plan", plan))))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(made) == 1
    assert len({id(t) for t, _ in got}) == 1 and len({id(p) for _, p in got}) == 1


def test_a_bare_view_and_scratch_share_the_arrays_and_keep_nothing_derived():
    g = graphs.rmat(6, seed=1, device="cpu")
    g.transpose()
    v = g.bare()
    assert np.shares_memory(v.indptr, g.indptr) and np.shares_memory(v.indices, g.indices)
    np.testing.assert_array_equal(v.ids, g.ids)
    assert v.token == g.token
    assert not v.has_derived("transpose")
    t = v.transpose()
    assert t is not g.transpose()
    np.testing.assert_array_equal(t.indices, g.transpose().indices)
    v.forget_derived()
    assert g.has_derived("transpose")
    # scratch: the graph itself where it keeps a transpose, else a bare view that drops what it derived
    with g.scratch() as same:
        assert same is g
    h = graphs.rmat(6, seed=1, device="cpu")
    with h.scratch() as view:
        t = view.transpose()
        assert view is not h and view.has_derived("transpose")
    assert not view.has_derived("transpose") and not h.has_derived("transpose")
    np.testing.assert_array_equal(t.indices, g.transpose().indices)


def test_transpose_and_degrees_match_scipy():
    src, dst, w = random_edges(weighted=True, seed=3)
    g = from_edges(src, dst, w, n=200, renumber=False)
    t = g.transpose()
    np.testing.assert_allclose(dense(t), dense(g).T)
    assert g.transpose() is t and t.transpose() is g
    a = g.to_scipy()
    np.testing.assert_array_equal(g.out_degree(), np.diff(a.indptr))
    np.testing.assert_array_equal(g.in_degree(), np.bincount(dst, minlength=200))
    np.testing.assert_allclose(g.out_degree(weighted=True), a.sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(g.in_degree(weighted=True), a.sum(axis=0), rtol=1e-6)


def test_token_is_content_based_and_used_by_dask(monkeypatch):
    src, dst, w = random_edges(weighted=True)
    _, first = np.unique(src * 200 + dst, return_index=True)  # distinct pairs: input order is irrelevant
    src, dst, w = src[first], dst[first], w[first]
    a = from_edges(src, dst, w, n=200, renumber=False)
    b = from_edges(src[::-1].copy(), dst[::-1].copy(), w[::-1].copy(), n=200, renumber=False)
    assert a is not b and a.token == b.token  # same edge set, canonical CSR
    w2 = w.copy()
    w2[0] += 1.0
    assert from_edges(src, dst, w2, n=200, renumber=False).token != a.token
    assert from_edges(src, dst, n=200, renumber=False).token != a.token
    assert from_edges(src, dst, w, n=201, renumber=False).token != a.token
    labels = from_edges(src + 1, dst + 1, w)  # same structure, different labels
    assert labels.token != from_edges(src, dst, w).token

    def no_pickle(self, protocol):
        raise AssertionError("dask pickled the graph to tokenize it")

    monkeypatch.setattr(CSRGraph, "__reduce_ex__", no_pickle, raising=False)
    assert tokenize(a) == tokenize(b) != tokenize(labels)


def test_pickle_round_trip_keeps_content():
    g = graphs.toy.labeled()
    h = pickle.loads(pickle.dumps(g))
    assert h.token == g.token and h.ids.tolist() == g.ids.tolist()


def test_reorder_by_degree_keeps_the_labelled_graph():
    g = graphs.rmat(8, seed=1, device="cpu", weighted=True)
    r = graphs.reorder(g)
    deg = r.out_degree() + r.in_degree()
    assert np.all(np.diff(deg) <= 0)

    def labelled(x):
        s, d, w = x.edges()
        return sorted(zip(x.ids[s].tolist(), x.ids[d].tolist(), w.tolist(), strict=True))

    assert labelled(r) == labelled(g)
    with pytest.raises(ValueError, match="permutation"):
        graphs.reorder(g, by=np.zeros(g.n, dtype=np.int64))


@pytest.mark.parametrize("device", DEVICES)
def test_device_round_trip_and_gpu_build_equals_cpu_build(device):
    src, dst, w = random_edges(weighted=True, seed=5)
    cpu = from_edges(src, dst, w, n=200, renumber=False, dedupe=True)
    if device == "gpu":
        import cupy as cp

        gpu = from_edges(cp.asarray(src), cp.asarray(dst), cp.asarray(w), n=200, renumber=False, dedupe=True)
        assert gpu.device == "gpu"
        for a, b in ((gpu.indptr, cpu.indptr), (gpu.indices, cpu.indices), (gpu.weights, cpu.weights)):
            np.testing.assert_array_equal(to_host(a), b)
        assert gpu.token == cpu.token  # computed on the GPU, same value
        t = gpu.transpose()
        np.testing.assert_array_equal(to_host(t.indices), cpu.transpose().indices)
        np.testing.assert_array_equal(to_host(t.weights), cpu.transpose().weights)
        np.testing.assert_array_equal(to_host(gpu.in_degree()), cpu.in_degree())
        relabelled = from_edges(cp.asarray(src + 10), cp.asarray(dst + 10))
        assert relabelled.ids.tolist() == from_edges(src + 10, dst + 10).ids.tolist()
    moved = cpu.to(device)
    assert moved.device == device and moved.token == cpu.token
    assert cpu.to("cpu") is cpu
    np.testing.assert_array_equal(to_host(moved.to("cpu").indices), cpu.indices)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64, np.uint16])
@pytest.mark.parametrize("w_dtype", [None, np.float32, np.float64, np.int32])
def test_count_ids_is_numpys_bincount_on_either_device(device, id_dtype, w_dtype):
    from graphs._build import count_ids
    from graphs._device import to_device

    rng = np.random.default_rng(3)
    n = 1000
    x = (rng.zipf(1.5, 20_000) % n).astype(id_dtype)  # skewed: many adds to a few counters
    w = None if w_dtype is None else (rng.uniform(0, 3, x.size) * 4).astype(w_dtype)
    got = count_ids(to_device(x, device), n + 5, weights=to_device(w, device))
    want = np.bincount(x, weights=w, minlength=n + 5)
    assert got.dtype == (np.int64 if w is None else np.float64) and got.shape == (n + 5,)
    if w is None:
        np.testing.assert_array_equal(to_host(got), want)
    else:
        np.testing.assert_allclose(to_host(got), want, rtol=1e-12)
    empty = count_ids(to_device(x[:0], device), 4)
    np.testing.assert_array_equal(to_host(empty), np.zeros(4, dtype=np.int64))


@pytest.mark.gpu
def test_a_large_host_array_goes_to_the_gpu_without_a_pinned_copy_of_itself():
    """Beyond PINNED_COPY_MAX an array is copied from where it is: equal on the GPU, and the process's
    resident memory does not grow by its size (CuPy's staging copy pins a buffer as large and keeps it)."""
    import os

    import cupy as cp

    from graphs._device import PINNED_COPY_MAX, to_device

    def resident() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    cp.get_default_pinned_memory_pool().free_all_blocks()
    cp.empty(8 * PINNED_COPY_MAX, dtype=np.uint8)  # the CUDA context and the device pool exist first
    cp.cuda.Device().synchronize()
    big = np.arange(8 * PINNED_COPY_MAX // 4, dtype=np.int32)  # 8 x the threshold
    before = resident()
    got = to_device(big, "gpu")
    cp.cuda.Device().synchronize()
    assert resident() - before < big.nbytes // 4
    assert np.array_equal(cp.asnumpy(got), big) and got.dtype == big.dtype
    strided = np.arange(2 * (PINNED_COPY_MAX // 8) + 2, dtype=np.int64)[::2]  # not contiguous
    assert np.array_equal(cp.asnumpy(to_device(strided, "gpu")), strided)
    small = np.arange(1000, dtype=np.float32)
    assert np.array_equal(cp.asnumpy(to_device(small, "gpu")), small)
