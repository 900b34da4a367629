"""Binned PageRank on the parts of a partitioned graph: layouts over a part's own rows, one iteration of a
part against pull's (CPU and GPU), and whole partitioned runs on CPU workers (the GPU workers' run is in
``test_pagerank_mg.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
import operators
from operators.pagerank import binned as pb
from operators.pagerank.parts import inverse_out, part_layout, step_cpu
from pipelines.distributed import pagerank as distributed_pagerank
from tests.conftest import DEVICES
from tests.operators.pagerank.test_binned import seg_lengths, skewed_graph, small_tuning


def decoded_edges(lay, chunk: int, bin_: int):
    """(source, row, weight) of every real slot of ``lay``, sorted: sources by chunk, rows by bin."""
    nc, nbins = lay["chunks"], lay["bins"]
    seg_of = np.repeat(np.arange(nc * nbins), seg_lengths(lay))
    real = np.asarray(lay["dst"]) != pb.PAD
    u = (seg_of // nbins) * chunk + np.asarray(lay["src"]).astype(np.int64)
    v = (seg_of % nbins) * bin_ + np.asarray(lay["dst"]).astype(np.int64)
    w = np.asarray(lay["w"])[real].tolist() if lay["w"] is not None else [0.0] * int(real.sum())
    return sorted(zip(u[real].tolist(), v[real].tolist(), w, strict=True))


@pytest.mark.parametrize("weighted", [False, True])
def test_a_parts_layout_holds_its_in_edges_over_its_own_rows(weighted):
    g = skewed_graph(weighted)
    pg = graphs.partition(g, 3)
    for part in pg.parts:
        rows = part.hi - part.lo
        w = part.weights if weighted else None
        lay = pb.binned_layout(
            part.indptr,
            part.indices,
            w,
            g.n,
            rows=rows,
            chunk_bits=5,
            bin_bits=4,
            fill_edges=40,
            sum_edges=24,
        )
        assert (lay["rows"], lay["chunks"], lay["bins"]) == (rows, -(-g.n // 32), -(-rows // 16))
        assert lay["sum_count"].size == lay["bins"] and lay["m_pad"] % pb.VEC == 0
        dst = np.repeat(np.arange(rows), np.diff(part.indptr))  # local rows
        want = part.weights.tolist() if weighted else [0.0] * part.m
        assert decoded_edges(lay, 32, 16) == sorted(
            zip(part.indices.tolist(), dst.tolist(), want, strict=True)
        )
    with pytest.raises(ValueError, match="expected 5"):
        pb.binned_layout(part.indptr, part.indices, None, g.n, rows=5, chunk_bits=5, bin_bits=4)
    with pytest.raises(ValueError, match="rows == n"):
        pb.binned_layout(
            part.indptr, part.indices, None, g.n, rows=rows, chunk_bits=5, bin_bits=4, rank=np.arange(g.n)
        )


def _one_iteration(g, weighted, seed=1):
    """A state to iterate from: x, p, dw (normalised), the inverse out-weights, c and the dangling mass."""
    rng = np.random.default_rng(seed)
    x, p, dw = (v / v.sum() for v in rng.random((3, g.n)))
    inv = inverse_out(graphs.partition(g, 1).parts[0], weighted)
    return x, p, dw, inv, x * inv, float(x[inv == 0].sum())


def _binned_step(device, part, x, p, dw, inv, c, dsum, weighted):
    """One binned iteration of ``part`` on ``device``: its rows' (x, c, L1 change, dangling mass). On the
    GPU the step writes into whole vectors, and every other row must be left as it was."""
    own = slice(part.lo, part.hi)
    if device == "cpu":
        return step_cpu(
            part, c, x[own], p[own], dw[own], dsum, alpha=0.85, weighted=weighted, method="binned"
        )
    import cupy as cp

    from operators.pagerank.binned.gpu import layout_step

    w = cp.asarray(part.weights) if weighted else None
    lay = part_layout(part, cp.asarray(part.indptr), cp.asarray(part.indices), w, np.float64)
    xn, cn, acc = cp.full(part.n, -1.0), cp.full(part.n, -1.0), cp.zeros((2, 3))
    acc[0, 0], acc[0, 1] = np.inf, dsum
    x_old, inv_d, p_d, dw_d = (cp.asarray(v) for v in (x, inv, p, dw))
    vargs = (
        x_old,
        xn,
        cn,
        inv_d,
        p_d,
        dw_d,
        np.int32(1),
        np.int32(1),
        acc[0],
        acc[1],
        np.float64(-1.0),
        np.float64(0.85),
        np.float64(1.0 / part.n),
    )
    layout_step(lay, weighted, np.float64, part.lo)(cp.asarray(c), vargs)
    outside = np.ones(part.n, dtype=bool)
    outside[own] = False
    assert np.all(xn.get()[outside] == -1.0) and np.all(cn.get()[outside] == -1.0)
    return xn[own].get(), cn[own].get(), *acc[1, :2].get().tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weighted", [False, True])
def test_a_parts_binned_step_equals_its_pull_step(device, weighted, monkeypatch):
    small_tuning(monkeypatch)
    g = skewed_graph(weighted)
    x, p, dw, inv, c, dsum = _one_iteration(g, weighted)
    for part in graphs.partition(g, 3).parts:
        own = slice(part.lo, part.hi)
        want = step_cpu(part, c, x[own], p[own], dw[own], dsum, alpha=0.85, weighted=weighted)
        got = _binned_step(device, part, x, p, dw, inv, c, dsum, weighted)
        for a, b in zip(got[:2], want[:2], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got[2:], want[2:], rtol=1e-10)
        kept = f"_binned_{weighted}_5_4_{device}"
        assert part._derived.get(kept) is not None  # the layout stays with the part


@pytest.fixture(scope="module")
def cpu_client():
    from distributed import Client

    from cluster import make_cluster

    with make_cluster(3, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        yield client


def test_cpu_workers_run_binned_parts(cpu_client):
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 3000, 30000), rng.integers(0, 3000, 30000)
    g = graphs.from_edges(src, dst, weights=rng.random(30000) + 0.1, n=3000, renumber=False)
    opts = dict(alpha=0.9, personalization={3: 1.0, 8: 3.0}, tol=1e-12)
    single = operators.pagerank(g, **opts)
    info = {}
    x = distributed_pagerank(graphs.partition(g, 3), cpu_client, method="binned", info=info, **opts)
    assert info == {"device": "cpu", "workers": 3, "method": "binned"}
    assert np.abs(x - single).max() < 1e-12
