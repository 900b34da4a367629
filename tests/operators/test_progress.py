"""The progress protocol of long operators (``operators._progress``): counts that never decrease and end
at their total, and the first call's compilation announced, on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
import operators
from operators._progress import COMPILE
from operators.influence import cpu as im_cpu
from operators.topk import walks


class Calls(list):
    def __call__(self, done, total, unit):
        self.append((done, total, unit))

    def of(self, unit) -> list:
        return [(d, t) for d, t, u in self if u == unit]


def check_counts(calls: list) -> None:
    """For one unit: ``done`` never decreases, stays within ``total`` and ends at it."""
    assert calls
    done = [d for d, _ in calls]
    assert done == sorted(done)
    assert all(0 <= d <= t for d, t in calls)
    assert calls[-1][0] == calls[-1][1]


@pytest.fixture
def graph():
    return graphs.rmat(9, seed=5, device="cpu")


def test_ppr_counts_its_sources_and_announces_the_first_calls_compilation(graph):
    calls = Calls()
    operators.ppr(graph, list(range(12)), topk=5, progress=calls)
    assert calls[0] == (0, 1, COMPILE) and calls.of(COMPILE) == [(0, 1), (1, 1)]
    check_counts(calls.of("sources"))
    assert calls.of("sources")[-1] == (12, 12)
    again = Calls()
    operators.ppr(graph, list(range(3)), topk=5, progress=again)  # compiled: nothing to announce
    assert again.of(COMPILE) == [] and again.of("sources")[-1] == (3, 3)


def test_ppr_power_iteration_counts_its_blocks_of_sources(graph):
    calls = Calls()
    operators.ppr(graph, list(range(10)), method="power", block=4, progress=calls)
    assert calls.of("sources") == [(4, 10), (8, 10), (10, 10)]


def test_index_build_counts_its_walks_in_steps(graph, monkeypatch):
    monkeypatch.setattr(walks, "PROGRESS_STEPS", 8)
    calls = Calls()
    index = operators.build_ppr_index(graph, seed=3, progress=calls)
    counts = calls.of("walks")
    check_counts(counts)
    assert len({d for d, _ in counts}) >= 5 and counts[-1][1] == index.walks
    plain = operators.build_ppr_index(graph, seed=3)  # the walks do not depend on the steps
    assert all(np.array_equal(a, plain.arrays[k]) for k, a in index.arrays.items())


def test_imm_counts_its_rr_samples_in_passes(graph, monkeypatch):
    monkeypatch.setattr(im_cpu, "PROGRESS_MIN_SAMPLES", 64)
    calls = Calls()
    res = operators.influence_maximization(graph, 3, seed=1, progress=calls)
    final = calls.of("RR sets")
    check_counts(final)
    check_counts(calls.of("RR sets (estimation)"))
    assert final[-1][0] == res.rr_sets and len({d for d, _ in final}) >= 5
    plain = operators.influence_maximization(graph, 3, seed=1)  # the samples do not depend on passes
    assert plain.seeds.tolist() == res.seeds.tolist() and plain.rr_size == res.rr_size


def test_simrank_topk_counts_its_sources_and_announces_compilation(graph):
    calls = Calls()
    operators.simrank_topk(graph, [0, 1, 2], k=3, samples=200, progress=calls)
    assert calls.of(COMPILE) == [(0, 1), (1, 1)]
    assert calls.of("sources") == [(1, 3), (2, 3), (3, 3)]


def test_topk_ppr_counts_its_sources_and_announces_compilation(graph):
    index = operators.build_ppr_index(graph, seed=3)
    calls = Calls()
    operators.topk_ppr(index, list(range(8)), k=4, progress=calls)
    assert calls.of(COMPILE) == [(0, 1), (1, 1)]
    check_counts(calls.of("sources"))
    assert calls.of("sources")[-1] == (8, 8)
