"""Partitioned PageRank over Dask workers equals single-device PageRank (cuGraph's MG test pattern)."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
import operators
from graphs._device import gpu_count, to_host
from pipelines.distributed.pagerank import pagerank as distributed_pagerank


@pytest.fixture(scope="module")
def cpu_client():
    from distributed import Client

    from cluster import make_cluster

    with make_cluster(4, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        yield client


@pytest.mark.parametrize("parts", [2, 3, 4])
def test_cpu_workers_match_single_pagerank(cpu_client, parts):
    g = graphs.rmat(11, seed=parts, device="cpu")
    single = operators.pagerank(g, tol=1e-9)
    info = {}
    x = distributed_pagerank(graphs.partition(g, parts), cpu_client, tol=1e-9, info=info)
    assert info == {"device": "cpu", "workers": parts, "method": "pull"}  # 'auto': CPU workers pull
    assert np.abs(x - single).max() < 1e-6 and abs(x.sum() - 1) < 1e-9


def test_weighted_personalized_from_saved_parts(cpu_client, tmp_path):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 300, 2000), rng.integers(0, 300, 2000)
    g = graphs.from_edges(src, dst, weights=rng.random(2000) + 0.1, n=300, renumber=False)
    opts = dict(alpha=0.9, personalization={3: 1.0, 8: 3.0}, dangling={1: 1.0}, tol=1e-10)
    single = operators.pagerank(g, **opts)
    graphs.partition(g, 3).save(tmp_path / "pg")
    x = distributed_pagerank(graphs.load_partitioned(tmp_path / "pg"), cpu_client, **opts)
    assert np.abs(x - single).max() < 1e-9


def test_errors(cpu_client):
    pg = graphs.partition(graphs.rmat(8, seed=0, device="cpu"), 2)
    with pytest.raises(TypeError, match=r"pipelines\.distributed\.pagerank\(PG, client"):
        operators.pagerank(pg)
    with pytest.raises(TypeError, match=r"see operators\.pagerank"):
        distributed_pagerank(graphs.rmat(8, seed=0, device="cpu"), cpu_client)
    with pytest.raises(ValueError, match="not 'push'"):
        distributed_pagerank(pg, cpu_client, method="push")
    with pytest.raises(ValueError, match="5 ranks need 5 workers"):
        distributed_pagerank(graphs.partition(graphs.rmat(8, seed=0, device="cpu"), 5), cpu_client)
    with pytest.raises(operators.ConvergenceError):
        distributed_pagerank(pg, cpu_client, max_iter=2, tol=1e-12)


@pytest.mark.gpu
def test_gpu_workers_match_single_gpu_pagerank():
    from distributed import Client

    from cluster import make_cluster

    g = graphs.rmat(16, seed=5, device="gpu")
    single = to_host(operators.pagerank(g, tol=1e-9, dtype=np.float64))
    parts = gpu_count()  # one part per GPU; on one GPU this still runs the NCCL path with one rank
    with make_cluster(device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
        info = {}
        pg = graphs.partition(g, parts)
        x = distributed_pagerank(pg, client, tol=1e-9, dtype=np.float64, info=info)
        assert info["device"] == "gpu" and len(info["timings"]) == parts
        assert np.abs(x - single).max() < 1e-6
        x32 = distributed_pagerank(pg, client, tol=1e-8)  # float32, as the single-GPU default
        assert np.abs(x32 - to_host(operators.pagerank(g, tol=1e-8))).max() < 1e-6
        from pipelines.distributed.pagerank import pagerank_partitioned

        kw = dict(
            alpha=0.85,
            x0=None,
            p=None,
            dw=None,
            weighted=False,
            max_iter=100,
            threshold=g.n * 1e-9,
            dtype=np.dtype(np.float64),
            device="gpu",
            info=None,
        )
        for exchange in ("broadcast", "allgather"):  # the default is 'halo'
            other, _, _ = pagerank_partitioned(pg, client, exchange=exchange, **kw)
            assert np.abs(other - single).max() < 1e-6
        assert {t["method"] for t in info["timings"]} == {"pull"}  # 'auto': 2**16 vertices fit in L2
        for dtype, bound in ((np.float64, 1e-9), (np.float32, 1e-6)):  # each part's rows laid out, halo
            info = {}
            xb = distributed_pagerank(pg, client, tol=1e-9, dtype=dtype, method="binned", info=info)
            assert {t["method"] for t in info["timings"]} == {"binned"}
            assert np.abs(xb - single).max() < bound, dtype
