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
    assert simrank_estimate(n, m).bytes == 2 * g + build_bytes(n, m) + m


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
    # the host's memory is stated, not checked here (the readers and generators check it)
    host = MemoryEstimate("x", "cpu", (("graph", 10**15),))
    assert host.check("-")["estimate_bytes"] == 10**15
