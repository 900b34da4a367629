"""operators._gpu.memory: the device memory estimates' terms; the check refuses before allocating."""

from __future__ import annotations

import pytest

import operators._gpu.memory as memory
from operators._gpu.memory import (
    MemoryEstimate,
    build_bytes,
    graph_bytes,
    pagerank_estimate,
    ppr_power_estimate,
    simrank_estimate,
)
from operators.errors import InsufficientMemoryError


def test_terms_are_the_arrays_bytes():
    # int64 row pointer, int32 columns (int64 from 2**31 vertices), float32 weights
    assert graph_bytes(10, 100) == 8 * 11 + 4 * 100
    assert graph_bytes(10, 100, weighted=True) == 8 * 11 + 8 * 100
    assert graph_bytes(2**31, 5) == 8 * (2**31 + 1) + 8 * 5
    assert build_bytes(10, 100) == 20 * 100 + 8 * 11


def test_estimates_add_their_parts():
    n, m = 1 << 20, 16 << 20
    g = graph_bytes(n, m)
    assert pagerank_estimate(n, m, weighted=False).bytes == 2 * g + build_bytes(n, m)
    # a batch of 32: four float64 n x 32 iterates outweigh the transpose's build
    assert ppr_power_estimate(n, m, 32).bytes == 2 * g + 4 * 8 * n * 32
    assert ppr_power_estimate(n, m, 1).bytes == 2 * g + build_bytes(n, m)
    # SimRank: the simplified copy's build, or at small epsilon a query's hop vectors (L + 1 of n float64)
    assert simrank_estimate(n, m, 14).bytes == 2 * g + build_bytes(n, m) + m
    assert simrank_estimate(n, m, 60).bytes == 3 * g + 8 * n * 65 > 2 * g + build_bytes(n, m) + m
    assert simrank_estimate(n, m, 14, "cpu").device == "cpu"


def test_check_refuses_what_does_not_fit_naming_what_would(monkeypatch):
    est = MemoryEstimate("PPR of 32 sources", "gpu", (("graph", 600), ("iterates", 400)))
    monkeypatch.setattr(memory, "free_memory", lambda device: 2000)
    assert est.check("fewer sources") == {
        "estimate_bytes": 1000,
        "free_bytes": 2000,
        "device": "gpu",
        "parts": {"graph": 600, "iterates": 400},
    }
    monkeypatch.setattr(memory, "free_memory", lambda device: 1100)  # 1000 > 90% of 1100
    with pytest.raises(InsufficientMemoryError, match=r"PPR of 32 sources on the GPU.*fewer sources"):
        est.check("fewer sources")
    # the graph is on the device already: the free memory excludes it, so only the iterates must fit
    on = MemoryEstimate("PPR of 32 sources", "gpu", est.parts, held=("graph",))
    assert on.check("fewer sources")["estimate_bytes"] == 1000
    monkeypatch.setattr(memory, "free_memory", lambda device: 440)  # 400 > 90% of 440
    with pytest.raises(InsufficientMemoryError, match=r"needs about 0.4 KiB but only 0.4 KiB"):
        on.check("fewer sources")
    monkeypatch.setattr(memory, "free_memory", lambda device: 1100)
    assert MemoryEstimate("the walks", "cpu", (("walks", 900),)).check("-")["device"] == "cpu"
    with pytest.raises(InsufficientMemoryError, match="the walks on the host"):
        MemoryEstimate("the walks", "cpu", (("walks", 10**6),)).check("-")


def test_an_index_whose_walks_do_not_fit_is_refused_before_they_are_drawn(monkeypatch):
    import graphs
    import operators.topk.index as index
    from operators import build_ppr_index

    g = graphs.rmat(8, seed=1, device="cpu")
    walks = []
    monkeypatch.setattr(index, "walk_keys", lambda *a, **k: walks.append(1))  # must not be reached
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", "10kB")
    with pytest.raises(InsufficientMemoryError, match=r"walks \(n=256\) on the host.*larger delta_min"):
        build_ppr_index(g, seed=0)
    assert not walks


def test_an_index_estimate_holds_the_graph_its_renumbered_copy_and_each_walk():
    import graphs
    from operators import build_ppr_index
    from operators._gpu.memory import graph_bytes
    from operators.topk.index import WALK_BYTES
    from operators.topk.irw import CHUNK, CHUNK_WORK

    g = graphs.rmat(8, seed=1, device="cpu")
    for order, copies in ((None, 1), ("degree", 2)):
        index = build_ppr_index(g, seed=0, order=order)
        est, walks = index.info["memory"], index.info["walks"]
        assert est["parts"]["walks"] == walks * WALK_BYTES["cpu"]
        assert est["parts"]["graph"] + est["parts"]["renumbered copy"] == copies * graph_bytes(g.n, g.m)
        assert est["parts"]["a chunk's work"] == min(walks, CHUNK) * CHUNK_WORK
        # only the walks and the chunk's work are still to be allocated when the estimate is checked
        assert est["estimate_bytes"] == sum(est["parts"].values())


def test_imm_states_its_estimate_and_refuses_what_does_not_fit(monkeypatch):
    import graphs
    from operators import influence_maximization

    g = graphs.rmat(9, seed=2, device="cpu")
    res = influence_maximization(g, 5, epsilon=0.5, seed=0)
    parts = res.memory["parts"]
    assert set(parts) == {"graph", "model", "samples drawn", "samples"} and res.memory["device"] == "cpu"
    # IC: row pointer, sources and probabilities of the in-edge view, probabilities of the forward one,
    # and one array of zero interval starts
    assert parts["graph"] == graph_bytes(g.n, g.m) and parts["model"] == 8 * (g.n + 1) + 16 * g.m
    assert res.memory["estimate_bytes"] == sum(parts.values())
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", "20kB")  # the graph alone takes more
    # the model is kept with the graph: the second call's first check is its first sampling round's
    with pytest.raises(
        InsufficientMemoryError, match=r"[\d,]+ RR samples \(about [\d.]+ elements each\) on the host"
    ):
        influence_maximization(g, 5, epsilon=0.5, seed=0)
    fresh = graphs.rmat(9, seed=2, device="cpu")
    with pytest.raises(
        InsufficientMemoryError, match=r"the LT diffusion model of n=512, m=[\d,]+ on the host"
    ):
        influence_maximization(fresh, 5, model="LT", epsilon=0.5, seed=0)
    assert not fresh.has_derived(repr(("im", "LT", "wc", None)))


def test_imm_states_the_model_build_when_it_is_the_larger_phase():
    import graphs
    from operators import influence_maximization
    from operators.influence.model import model_build_bytes

    g = graphs.rmat(9, seed=2, device="cpu")
    res = influence_maximization(
        g, 1, epsilon=0.9, max_rr_sets=10, seed=0
    )  # few samples: the build is larger
    assert res.memory["parts"] == {
        "graph": graph_bytes(g.n, g.m),
        "model build": model_build_bytes(g.n, g.m, "IC"),
    }
    assert res.memory["estimate_bytes"] == sum(res.memory["parts"].values())
