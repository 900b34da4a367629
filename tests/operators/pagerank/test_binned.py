"""The binned (propagation-blocked) PageRank: its edge layout, and its ranks with many chunks and bins."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import graphs
from graphs._device import to_host
from operators import pagerank
from operators.pagerank import auto_method
from operators.pagerank import binned as pb
from operators.pagerank.binned.gpu import binned_fits
from tests.conftest import DEVICES, as_vector


def small_tuning(monkeypatch, chunk_bits=5, bin_bits=4, fill_edges=40, sum_edges=24):
    """Chunks of 32 sources and bins of 16 rows, items of a few vectors: every path of the layout."""
    for size in (4, 8):
        monkeypatch.setitem(pb.TUNING, size, {"chunk_bits": chunk_bits, "bin_bits": bin_bits})
    monkeypatch.setitem(pb.TUNING, "fill_edges", fill_edges)
    monkeypatch.setitem(pb.TUNING, "sum_edges", sum_edges)


def skewed_graph(weighted=False):
    """R-MAT 10 with a hub of 900 in-edges and duplicate edges: hub bins need several sum items."""
    g = graphs.rmat(10, seed=7, weighted=weighted, device="cpu")
    src, dst, w = g.edges()
    rng = np.random.default_rng(2)
    src = np.concatenate([src, rng.integers(0, g.n, 900), np.full(5, 3)])
    dst = np.concatenate([dst, np.full(900, 17), np.full(5, 40)])
    w = None if w is None else np.concatenate([w, rng.uniform(0.5, 2, 905)]).astype(np.float32)
    return graphs.from_edges(src, dst, w, n=g.n, renumber=False)


def seg_lengths(lay):
    """Edge slots of every segment, chunk after chunk and bins in order inside a chunk (host int64)."""
    return (np.diff(lay["pre"], axis=1).T.reshape(-1)).astype(np.int64) * pb.VEC


def multigraph(g):
    """NetworkX's graph of ``g`` keeping its duplicate edges (a DiGraph would merge them)."""
    src, dst, w = g.edges()
    out = nx.MultiDiGraph()
    out.add_nodes_from(range(g.n))
    w = np.ones(g.m) if w is None else w.astype(float)
    out.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), w.tolist(), strict=True))
    return out


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("renumbered", [False, True])
def test_layout_holds_every_in_edge_once_in_segment_order(weighted, renumbered):
    g = skewed_graph(weighted)
    T = g.transpose()
    wt = T.weights if weighted else None
    perm = np.random.default_rng(4).permutation(g.n) if renumbered else np.arange(g.n)
    rank = np.empty(g.n, dtype=np.int64)
    rank[perm] = np.arange(g.n)
    lay = pb.binned_layout(
        T.indptr,
        T.indices,
        wt,
        g.n,
        chunk_bits=5,
        bin_bits=4,
        fill_edges=40,
        sum_edges=24,
        rank=rank if renumbered else None,
    )
    nc, nbins = lay["chunks"], lay["bins"]
    kinds = {
        "src": np.uint16,
        "dst": np.uint16,
        "pre": np.int32,
        "segv": np.int32,
        "fill_group": np.int32,
        "fill_lo": np.int64,
        "fill_hi": np.int64,
        "sum_group": np.int32,
        "sum_lo": np.int32,
        "sum_hi": np.int32,
        "sum_count": np.int32,
    }  # the kernels' argument types
    assert {k: lay[k].dtype for k in kinds} == {k: np.dtype(t) for k, t in kinds.items()}
    assert (nc, nbins) == (-(-g.n // 32), -(-g.n // 16)) and lay["m_pad"] % pb.VEC == 0
    real = lay["dst"] != pb.PAD
    assert int(real.sum()) == g.m
    # segment of every slot, from the table: chunk c, bin b starts at segv[b, c] vectors
    seg_start = lay["segv"].T.reshape(-1).astype(np.int64) * pb.VEC
    seg_len = seg_lengths(lay)
    assert seg_start[0] == 0 and np.all(seg_start[1:] == seg_start[:-1] + seg_len[:-1])
    seg_of = np.repeat(np.arange(nc * nbins), seg_len)
    chunk, bin_ = seg_of // nbins, seg_of % nbins
    u = chunk * 32 + lay["src"].astype(np.int64)
    v = bin_ * 16 + lay["dst"].astype(np.int64)
    w_got = (lay["w"][real] if weighted else u[real] * 0).tolist()
    got = sorted(zip(perm[u[real]].tolist(), perm[v[real]].tolist(), w_got, strict=True))  # old ids
    src, dst, w = g.edges()
    w_want = (w if weighted else src * 0).astype(np.float32).tolist()
    want = sorted(zip(src.tolist(), dst.tolist(), w_want, strict=True))
    assert got == want
    for k in range(nc * nbins):  # sorted by destination, padding only at the end, fewer than VEC of it
        d = lay["dst"][seg_start[k] : seg_start[k] + seg_len[k]].astype(np.int64)
        assert np.all(np.diff(d) >= 0) and np.sum(d == pb.PAD) < pb.VEC
    # fill items: each chunk's edges, in order, at most 5 vectors each
    starts = pb.chunk_starts(lay)
    for c in range(nc):
        mine = lay["fill_group"] == c
        lo, hi = lay["fill_lo"][mine], lay["fill_hi"][mine]
        assert np.all(hi - lo <= 5) and np.all(hi > lo)
        if mine.any():
            assert lo[0] == starts[c] and hi[-1] == starts[c + 1] and np.all(lo[1:] == hi[:-1])
        else:
            assert starts[c] == starts[c + 1]
    # sum items: each bin's flat positions [0, its vectors), 3 vectors at most; an empty bin has one item
    for b in range(nbins):
        mine = lay["sum_group"] == b
        lo, hi = lay["sum_lo"][mine], lay["sum_hi"][mine]
        assert lay["sum_count"][b] == mine.sum() >= 1 and lo[0] == 0 and hi[-1] == lay["pre"][b, -1]
        assert np.all(lo[1:] == hi[:-1]) and np.all(hi - lo <= 3)
    assert lay["sum_count"].max() > 10  # the hub's bin is cut into many items


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weighted", [False, True])
def test_many_chunks_and_bins_equal_networkx(device, weighted, monkeypatch):
    small_tuning(monkeypatch)
    g = skewed_graph(weighted)
    rng = np.random.default_rng(5)
    p = {int(v): float(rng.uniform(0.5, 2)) for v in rng.choice(g.n, 20, replace=False)}
    d = {int(v): 1.0 for v in rng.choice(g.n, 3, replace=False)}
    ref = as_vector(
        g,
        nx.pagerank(
            multigraph(g),
            alpha=0.9,
            personalization=p,
            dangling=d,
            tol=1e-13,
            weight="weight" if weighted else None,
        ),
    )
    dtypes = [np.float64, np.float32] if device == "gpu" else [None]
    for dtype in dtypes:  # float32 (sums in float32) stops at an L1 change of 3e-7, within 10 x that
        tol = 3e-7 / g.n if dtype == np.float32 else 1e-13
        got = to_host(
            pagerank(
                g.to(device),
                method="binned",
                alpha=0.9,
                personalization=p,
                dangling=d,
                tol=tol,
                max_iter=500,
                dtype=dtype,
            )
        ).astype(np.float64)
        bound = 1e-10 if dtype != np.float32 else 3e-6
        assert np.abs(got - ref).sum() < bound, (dtype, np.abs(got - ref).sum())


@pytest.mark.parametrize("device", DEVICES)
def test_binned_matches_pull_on_an_rmat_graph(device, monkeypatch):
    small_tuning(monkeypatch, chunk_bits=9, bin_bits=8, fill_edges=4096, sum_edges=2048)
    g = graphs.reorder(graphs.rmat(13, seed=1, device="cpu")).to(device)  # hubs first: heavy first bins
    pull = to_host(pagerank(g, method="pull", tol=1e-12, dtype=np.float64 if device == "gpu" else None))
    got = to_host(pagerank(g, method="binned", tol=1e-12, dtype=np.float64 if device == "gpu" else None))
    assert np.abs(got - pull).sum() < 1e-10
    assert g.has_derived("pagerank_binned_False_9_8")  # the layout stays with the graph


def test_auto_method_and_limits():
    g = graphs.rmat(8, seed=0, device="cpu")
    assert auto_method(g, np.float64, False) == "pull"  # the CPU always pulls unless asked
    assert binned_fits(4096 << 15, np.float32) and not binned_fits((4096 << 15) + 1, np.float32)
    assert not binned_fits((4096 << 14) + 1, np.float64)
    with pytest.raises(ValueError, match="chunk_bits"):
        T = g.transpose()
        pb.binned_layout(T.indptr, T.indices, None, g.n, chunk_bits=17, bin_bits=4)


@pytest.mark.gpu
def test_auto_method_on_the_gpu_pulls_while_the_vector_fits_in_l2():
    g = graphs.rmat(10, seed=0, device="gpu")
    assert auto_method(g, np.float32, False) == "pull"


@pytest.mark.gpu
def test_auto_bins_where_the_layout_is_kept_even_without_room_for_a_build(monkeypatch):
    """``method='auto'`` asks for free memory to build the layout only where none is kept: a graph
    that keeps its layout from an earlier call is binned again (also under ``reorder=True``, with no
    copy), however little memory a new build would find; the kept layout counts only for its own
    weighting and value type."""
    import importlib

    gpu_binned = importlib.import_module("operators.pagerank.binned.gpu")
    monkeypatch.setattr(gpu_binned, "l2_cache_bytes", lambda: 1024)  # the vector outgrows the L2
    g = graphs.rmat(11, seed=4, device="gpu")
    monkeypatch.setattr(gpu_binned, "build_bytes", lambda m, weighted: 1 << 60)  # no room to build
    assert auto_method(g, np.float32, False) == "pull"
    want = to_host(pagerank(g, method="pull", dtype=np.float64, tol=1e-12))
    pagerank(g, method="binned", tol=1e-9)  # builds the layout, kept with g
    assert auto_method(g, np.float32, False) == "binned"
    info: dict = {}
    got = to_host(pagerank(g, reorder=True, info=info, tol=3e-7 / g.n))
    assert not info["degree_order"] and not g.has_derived("pagerank_degree_order")
    assert np.abs(got - want).sum() < 3e-6
    g.forget_derived()
    assert auto_method(g, np.float32, False) == "pull"
    w = graphs.rmat(11, seed=4, weighted=True, device="gpu")  # a kept layout serves its own weighting
    pagerank(w, method="binned", weighted=False, tol=1e-9)
    assert auto_method(w, np.float32, False) == "binned" and auto_method(w, np.float32, True) == "pull"
    assert auto_method(w, np.float64, False) == "pull"  # binned runs in float32 only under auto


@pytest.mark.gpu
def test_reorder_makes_no_copy_where_auto_bins_the_degree_order(monkeypatch):
    """``reorder=True`` with ``method='auto'``: where binned would run on the degree order (here an L2
    made small), no renumbered copy is built and binned runs on the graph as it is - over its own
    permutation where the graph's first ids hold few edges - giving pull's vector on the copy. Where
    auto pulls (the real L2 holds the graph's vector), the copy is built as asked."""
    import importlib

    gpu_binned = importlib.import_module("operators.pagerank.binned.gpu")
    g = graphs.rmat(11, seed=4, device="gpu")
    info = {}
    pagerank(g, reorder=True, info=info, tol=1e-9)
    assert info["degree_order"] and g.has_derived("pagerank_degree_order")  # auto pulls here
    g.forget_derived()
    want = to_host(pagerank(g, method="pull", reorder=True, dtype=np.float64, tol=1e-12))
    g.forget_derived()
    monkeypatch.setattr(gpu_binned, "l2_cache_bytes", lambda: 1024)
    got = to_host(pagerank(g, reorder=True, info=info, tol=3e-7 / g.n))  # float32: as in the test above
    assert not info["degree_order"] and not g.has_derived("pagerank_degree_order")
    bits = pb.TUNING[4]
    assert g.has_derived(f"pagerank_binned_False_{bits['chunk_bits']}_{bits['bin_bits']}")  # binned ran
    assert np.abs(got - want).sum() < 3e-6
    # a graph whose first ids hold 4% of its edges (28% in degree order): binned renumbers its layout
    small_tuning(monkeypatch, chunk_bits=6, bin_bits=5, fill_edges=256, sum_edges=128)
    monkeypatch.setitem(pb.TUNING, "hot_vertices", 16)
    s = skewed_graph(weighted=True).to("gpu")
    want = to_host(pagerank(s, method="pull", reorder=True, dtype=np.float64, tol=1e-12))
    s.forget_derived()
    got = to_host(pagerank(s, reorder=True, info=info, tol=3e-7 / s.n))
    assert not info["degree_order"] and not s.has_derived("pagerank_degree_order")
    assert s.has_derived("pagerank_binned_order") and s.has_derived("pagerank_binned_True_6_5_ordered")
    assert np.abs(got - want).sum() < 3e-6


@pytest.mark.parametrize("device", DEVICES)
def test_graphs_without_edges_or_with_one_vertex(device):
    empty = graphs.from_edges(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), n=5, renumber=False)
    got = to_host(pagerank(empty.to(device), method="binned", personalization=np.arange(1.0, 6.0)))
    np.testing.assert_allclose(got, np.arange(1.0, 6.0) / 15, atol=1e-7)  # all dangling: x = p
    loop = graphs.from_edges(np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64), n=1, renumber=False)
    np.testing.assert_allclose(to_host(pagerank(loop.to(device), method="binned")), [1.0], atol=1e-7)


@pytest.mark.gpu
def test_auto_pulls_when_the_layout_does_not_fit(monkeypatch):
    import importlib

    gpu_binned = importlib.import_module("operators.pagerank.binned.gpu")
    pr = importlib.import_module("operators.pagerank")  # the module: `operators.pagerank` is the function

    def no_room(*args, **kw):
        raise MemoryError("out of memory (simulated)")

    g = graphs.rmat(10, seed=3, device="gpu")
    pull = to_host(pagerank(g, method="pull", tol=1e-9))
    monkeypatch.setattr(pr, "auto_method", lambda *a: "binned")
    monkeypatch.setattr(gpu_binned, "binned_step", no_room)
    with pytest.warns(RuntimeWarning, match="pulls instead"):
        got = to_host(pagerank(g, tol=1e-9))
    np.testing.assert_array_equal(got, pull)
    with pytest.raises(MemoryError):  # asked for by name: the error stands
        pagerank(g, method="binned")


@pytest.mark.parametrize("device", DEVICES)
def test_graphs_not_in_degree_order_are_binned_over_renumbered_ids(device, monkeypatch):
    small_tuning(monkeypatch, chunk_bits=6, bin_bits=5, fill_edges=256, sum_edges=128)
    monkeypatch.setitem(pb.TUNING, "hot_vertices", 16)  # the first 16 ids: 4% of the edges (28% reordered)
    g = skewed_graph(weighted=True).to(device)
    assert pb.hot_share(g) < 0.2 and pb.hot_share(graphs.reorder(g)) >= 0.2
    p = {5: 1.0, 900: 2.0}
    dtype = np.float64 if device == "gpu" else None
    pull = to_host(pagerank(g, method="pull", tol=1e-12, personalization=p, dangling={7: 1.0}, dtype=dtype))
    got = to_host(pagerank(g, method="binned", tol=1e-12, personalization=p, dangling={7: 1.0}, dtype=dtype))
    assert g.has_derived("pagerank_binned_order") and g.has_derived("pagerank_binned_True_6_5_ordered")
    assert np.abs(got - pull).sum() < 1e-10
    ordered = graphs.reorder(g)  # already in degree order: no permutation, no renumbered layout
    pagerank(ordered, method="binned", tol=1e-8)
    assert not ordered.has_derived("pagerank_binned_order")
    assert ordered.has_derived("pagerank_binned_True_6_5")


@pytest.mark.gpu
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("renumbered", [False, True])
def test_the_gpu_builds_the_cpu_layout(weighted, renumbered):
    import cupy as cp

    g = skewed_graph(weighted)
    T, Tg = g.transpose(), g.to("gpu").transpose()
    rank = np.random.default_rng(6).permutation(g.n).astype(np.int64) if renumbered else None
    opts = dict(chunk_bits=5, bin_bits=4, fill_edges=40, sum_edges=24)
    cpu = pb.binned_layout(T.indptr, T.indices, T.weights if weighted else None, g.n, rank=rank, **opts)
    gpu = pb.binned_layout(
        Tg.indptr,
        Tg.indices,
        Tg.weights if weighted else None,
        g.n,
        rank=None if rank is None else cp.asarray(rank),
        **opts,
    )
    for k, v in cpu.items():
        if k != "w":
            np.testing.assert_array_equal(to_host(gpu[k]) if hasattr(gpu[k], "get") else gpu[k], v, err_msg=k)
        elif weighted:  # equal keys (duplicate edges) may take their weights in another order
            seg_of = np.repeat(np.arange(cpu["pre"].size - cpu["pre"].shape[0]), seg_lengths(cpu))
            got, want = (
                sorted(zip(seg_of.tolist(), to_host(lay["w"]).tolist(), strict=True)) for lay in (gpu, cpu)
            )
            assert got == want


def test_a_kept_layout_states_the_bytes_of_a_run_of_it():
    """``kept_run_bytes``: None until the graph keeps the layout a value type's binned iteration runs on;
    then a value per padded edge, a row sum per destination and a counter per bin (as ``layout_step``
    allocates them), for that layout's value type and weighting only."""
    g = graphs.rmat(10, seed=4, device="cpu")
    assert pb.kept_run_bytes(g, False, np.float64) is None
    pagerank(g, method="binned")  # the CPU bins in float64
    bits = pb.TUNING[8]
    lay = g.derived(f"pagerank_binned_False_{bits['chunk_bits']}_{bits['bin_bits']}", lambda _: None)
    assert lay is not None and lay["m_pad"] >= g.m
    assert pb.kept_run_bytes(g, False, np.float64) == 8 * (lay["m_pad"] + lay["rows"]) + 4 * lay["bins"]
    assert pb.kept_run_bytes(g, True, np.float64) is None  # another weighting
    assert pb.kept_run_bytes(g, False, np.float32) is None  # float32's layout has other bits
