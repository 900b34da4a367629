"""Generators: exact sizes, determinism, CPU == GPU, and statistics against the models."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
from tests.conftest import DEVICES

A, B, C = 0.57, 0.19, 0.19
D = 1 - A - B - C


def test_rmat_sizes_determinism_and_scrambling():
    g = graphs.rmat(10, edge_factor=8, seed=3, device="cpu")
    assert (g.n, g.m) == (1024, 8192) and g.directed
    assert graphs.rmat(10, edge_factor=8, seed=3, device="cpu").token == g.token
    assert graphs.rmat(10, edge_factor=8, seed=4, device="cpu").token != g.token
    # unscrambled R-MAT puts the hub at vertex 0; the scramble moves it elsewhere
    assert int(np.argmax(g.out_degree())) != 0
    assert graphs.rmat(10, seed=1, weighted=True, device="cpu").weights.min() > 0


def test_rmat_degree_statistics_match_the_model():
    # out-degree of u ~ Binomial(m, P(u)), P(u) = prod over bits of (a+b) or (c+d); so
    # E[sum_u d_u^2] = m (1 - S) + m^2 S with S = ((a+b)^2 + (c+d)^2)^scale (spread measured: < 1%).
    scale = 14
    g = graphs.rmat(scale, seed=11, device="cpu")
    m = g.m
    for deg, (p0, p1) in ((g.out_degree(), (A + B, C + D)), (g.in_degree(), (A + C, B + D))):
        s = (p0**2 + p1**2) ** scale
        expected = m * (1 - s) + m * m * s
        assert abs(float((deg.astype(float) ** 2).sum()) / expected - 1) < 0.05
    # an edge is a self-loop iff every level picks quadrant a or d: Poisson(m (a+d)^scale)
    src, dst, _ = g.edges()
    loops, mean = int((src == dst).sum()), m * (A + D) ** scale
    assert abs(loops - mean) < 5 * np.sqrt(mean)


def test_rmat_options():
    g = graphs.rmat(9, seed=0, device="cpu", directed=False, dedupe=True, self_loops=False)
    a = g.to_scipy()
    assert (a != a.T).nnz == 0 and a.diagonal().sum() == 0 and a.max() == 1
    with pytest.raises(ValueError, match="scale"):
        graphs.rmat(0)
    with pytest.raises(ValueError, match="a \\+ b \\+ c"):
        graphs.rmat(5, a=0.6, b=0.3, c=0.3)


def test_erdos_renyi_gnm_and_gnp():
    g = graphs.erdos_renyi(500, m=4000, seed=1)
    src, dst, _ = g.edges()
    assert g.m == 4000 and not (src == dst).any()
    assert np.unique(src.astype(np.int64) * 500 + dst).size == 4000
    n, p = 2000, 0.003
    h = graphs.erdos_renyi(n, p=p, seed=2)
    pairs = n * (n - 1)
    assert abs(h.m - pairs * p) < 5 * np.sqrt(pairs * p * (1 - p))
    deg = h.out_degree().astype(float)  # Binomial(n-1, p): variance/mean = 1 - p
    assert abs(deg.var() / deg.mean() - (1 - p)) < 0.1
    u = graphs.erdos_renyi(300, m=1000, seed=3, directed=False)
    a = u.to_scipy()
    assert u.m == 2000 and (a != a.T).nnz == 0 and a.diagonal().sum() == 0 and a.max() == 1
    dense = graphs.erdos_renyi(30, m=800, seed=4)  # > a quarter of all pairs: the ranking path
    assert dense.m == 800 and dense.to_scipy().max() == 1
    with pytest.raises(ValueError, match="exactly one"):
        graphs.erdos_renyi(10, p=0.1, m=3)
    with pytest.raises(ValueError, match="m must be"):
        graphs.erdos_renyi(10, m=91)


def test_barabasi_albert_tail_matches_theory():
    n, m = 20000, 3
    g = graphs.barabasi_albert(n, m, seed=5)
    assert not g.directed and g.m == 2 * m * (n - m)
    src, dst, _ = g.edges()
    assert not (src == dst).any() and g.to_scipy().max() == 1
    # P(deg >= K) = m (m + 1) / (K (K + 1)) in the BA limit (spread over seeds measured: 0.0015)
    K = 4 * m
    assert abs(float((g.out_degree() >= K).mean()) - m * (m + 1) / (K * (K + 1))) < 0.01
    assert graphs.barabasi_albert(n, m, seed=5).token == g.token
    with pytest.raises(ValueError, match="1 <= m < n"):
        graphs.barabasi_albert(3, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_same_seed_same_graph_on_every_device(device):
    for make in (
        lambda dev: graphs.rmat(11, seed=7, device=dev, weighted=True),
        lambda dev: graphs.rmat(10, seed=2, device=dev, directed=False, dedupe=True),
        lambda dev: graphs.erdos_renyi(400, p=0.01, seed=8, device=dev),
        lambda dev: graphs.erdos_renyi(40, m=500, seed=8, directed=False, device=dev),
        lambda dev: graphs.barabasi_albert(300, 2, seed=9, device=dev),
    ):
        g = make(device)
        assert g.device == device and g.token == make("cpu").token
