"""StreamPool.interleave: several query generators driven from one thread, each on its slot's stream (the
scheduling only: CuPy's streams are stood in for, so it runs on the CPU; the GPU test of the same path is
``test_topk_ppr.test_gpu_streams_answer_as_one_at_a_time``)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

import operators._streams as st


class FakeStream:
    """A context manager standing in for ``cupy.cuda.Stream``: ``active`` is the current one."""

    active = None
    ids = itertools.count()

    def __init__(self, non_blocking: bool):
        assert non_blocking
        self.id = next(self.ids)

    def __enter__(self):
        self.prev, FakeStream.active = FakeStream.active, self
        return self

    def __exit__(self, *exc):
        FakeStream.active = self.prev


class Work:
    """A workspace made on its slot's stream whose queued step reports ready on every third poll."""

    def __init__(self):
        self.stream, self.polls = FakeStream.active, 0

    def ready(self) -> bool:
        self.polls += 1
        return self.polls % 3 == 0


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(st, "import_cupy", lambda: SimpleNamespace(cuda=SimpleNamespace(Stream=FakeStream)))
    return st.StreamPool(Work)


def _query(item, work, log, live, fail=None):
    """``item % 4`` steps (0: done without yielding), each checked to run on the workspace's stream."""
    live.append(item)
    log += [("start", item), ("peak", len(live))]
    for step in range(item % 4):
        assert FakeStream.active is work.stream
        if item == fail:
            raise RuntimeError(f"query {item} failed")
        yield
        assert FakeStream.active is work.stream
        log.append(("step", item, step))
    live.remove(item)
    log.append(("done", item))


@pytest.mark.parametrize("workers", [1, 3, 8])
def test_interleave_runs_every_item_once_on_its_slot(pool, workers):
    items = list(range(23))
    for _ in range(2):  # the slots made by the first call serve the second
        log, live = [], []
        pool.interleave(lambda item, work: _query(item, work, log, live), items, workers)  # noqa: B023
        assert sorted(e[1] for e in log if e[0] == "done") == items
        assert sorted(e[1:] for e in log if e[0] == "step") == [(i, s) for i in items for s in range(i % 4)]
        assert max(e[1] for e in log if e[0] == "peak") == workers  # never more in flight
        assert not live
        assert pool.size == workers and len(pool._free) == workers
    if workers > 1:  # interleaved, not one after another: others step while query 3 (three steps) runs
        during = log[log.index(("start", 3)) : log.index(("done", 3))]
        assert any(e[0] == "step" and e[1] != 3 for e in during)


def test_interleave_raises_the_first_error_and_keeps_its_slots(pool):
    log, live = [], []
    with pytest.raises(RuntimeError, match="query 6 failed"):
        pool.interleave(lambda item, work: _query(item, work, log, live, fail=6), list(range(12)), 3)
    assert pool.size == 3 and len(pool._free) == 3  # every slot is back in the pool
    log, live = [], []
    pool.interleave(lambda item, work: _query(item, work, log, live), [5, 6, 7], 3)
    assert sorted(e[1] for e in log if e[0] == "done") == [5, 6, 7]


def test_exhaust_returns_the_generators_value():
    def gen():
        yield
        yield
        return 42

    assert st.exhaust(gen()) == 42
