"""IMM with its RR samples drawn over Dask workers picks the seeds of one process (same seed)."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
from operators import influence_maximization
from pipelines.distributed.influence import influence_maximization as distributed_imm


@pytest.fixture(scope="module")
def cpu_cluster():
    from distributed import Client

    from cluster import make_cluster

    with make_cluster(3, device="cpu", dashboard_address=":0") as cl, Client(cl) as client:
        yield client


@pytest.mark.parametrize(("model", "rounds"), [("IC", 1), ("LT", 1), ("IC", 3)])
def test_samples_spread_over_workers_pick_the_same_seeds(model, rounds, cpu_cluster):
    g = graphs.barabasi_albert(2000, 3, seed=4)
    one = influence_maximization(g, 8, epsilon=0.3, model=model, rounds=rounds, seed=2)
    spread = distributed_imm(g, 8, cpu_cluster, epsilon=0.3, model=model, rounds=rounds, seed=2)
    assert spread.workers == 3 and spread.device == "cpu"
    assert (
        spread.seeds.tolist() == one.seeds.tolist()
        and spread.seed_rounds.tolist() == one.seed_rounds.tolist()
    )
    np.testing.assert_allclose(spread.gains, one.gains)
    assert (spread.rr_sets, spread.rr_size, spread.theta) == (one.rr_sets, one.rr_size, one.theta)


@pytest.mark.gpu
def test_samples_spread_over_gpu_workers_pick_the_same_seeds():
    from distributed import Client

    from cluster import make_cluster

    g = graphs.barabasi_albert(20_000, 4, seed=1)
    one = influence_maximization(g.to("gpu"), 20, epsilon=0.2, seed=5)
    with make_cluster(device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
        spread = distributed_imm(g, 20, client, epsilon=0.2, seed=5)
    assert spread.device == "gpu" and spread.seeds.tolist() == one.seeds.tolist()
    assert (spread.rr_sets, spread.rr_size) == (one.rr_sets, one.rr_size)
