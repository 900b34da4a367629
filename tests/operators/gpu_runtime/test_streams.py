"""StreamPool.interleave: several query generators driven from one thread, each on its slot's stream, whose
workspace is made on the caller's stream (the scheduling only: CuPy's streams are stood in for, so it
runs on the CPU; the GPU test of the same path is
``test_topk_ppr.test_gpu_streams_answer_as_one_at_a_time``)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from operators._gpu import streams as st

SEQ = itertools.count()  # the order in which workspaces are made and events recorded


class FakeEvent:
    """Stands in for ``cupy.cuda.Event``: remembers on which stream (None: the caller's) and when it was
    recorded."""

    def __init__(self, block: bool = False, disable_timing: bool = True):
        self.on, self.seq = "never", None

    def record(self):
        self.on, self.seq = FakeStream.active, next(SEQ)


class FakeStream:
    """A context manager standing in for ``cupy.cuda.Stream``: ``active`` is the current one."""

    active = None
    ids = itertools.count()

    def __init__(self, non_blocking: bool):
        assert non_blocking
        self.id, self.waited, self.synced = next(self.ids), [], 0

    def __enter__(self):
        self.prev, FakeStream.active = FakeStream.active, self
        return self

    def __exit__(self, *exc):
        FakeStream.active = self.prev

    def wait_event(self, event):
        self.waited.append(event)

    def synchronize(self):
        self.synced += 1


class Work:
    """A workspace whose queued step reports ready on every third poll. It is made on the caller's stream
    (CuPy's pool reuses freed memory only there); ``stream`` is its slot's, seen at its first step."""

    def __init__(self):
        self.made_on, self.seq, self.stream, self.polls = FakeStream.active, next(SEQ), None, 0

    def ready(self) -> bool:
        self.polls += 1
        return self.polls % 3 == 0


@pytest.fixture
def pool(monkeypatch):
    fake = SimpleNamespace(cuda=SimpleNamespace(Stream=FakeStream, Event=FakeEvent))
    monkeypatch.setattr(st, "import_cupy", lambda: fake)
    return st.StreamPool(Work)


def _query(item, work, log, live, fail=None):
    """``item % 4`` steps (0: done without yielding), each checked to run on the workspace's stream."""
    live.append(item)
    log += [("start", item), ("peak", len(live))]
    for step in range(item % 4):
        if work.stream is None:  # its slot's stream, which waits for what made the workspace
            work.stream = FakeStream.active
            assert work.stream is not None and work.made_on is None
            assert any(e.on is None and e.seq > work.seq for e in work.stream.waited)
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
    assert all(stream.synced for stream, _ in pool._free)  # their queued work done before any reuse
    log, live = [], []
    pool.interleave(lambda item, work: _query(item, work, log, live), [5, 6, 7], 3)
    assert sorted(e[1] for e in log if e[0] == "done") == [5, 6, 7]


def test_interleave_runs_on_the_slots_that_fit_when_a_workspace_finds_no_memory(monkeypatch):
    fake = SimpleNamespace(cuda=SimpleNamespace(Stream=FakeStream, Event=FakeEvent))
    monkeypatch.setattr(st, "import_cupy", lambda: fake)
    made = itertools.count()

    def make():  # the third workspace finds no memory (CuPy raises OutOfMemoryError, a MemoryError)
        if next(made) == 2:
            raise MemoryError("Out of memory allocating 537,408,000 bytes")
        return Work()

    pool, log, live = st.StreamPool(make), [], []
    items = list(range(23))
    with pytest.warns(RuntimeWarning, match=r"2 of 5 GPU query workspaces fit in memory \(Out of memory"):
        pool.interleave(lambda item, work: _query(item, work, log, live), items, 5)
    assert sorted(e[1] for e in log if e[0] == "done") == sorted(items)  # the item without a slot too
    assert max(e[1] for e in log if e[0] == "peak") <= 2 and not live
    assert pool.size == 2 and len(pool._free) == 2  # the failed slot is not counted


def test_close_closes_the_kept_workspaces_after_their_streams(pool, monkeypatch):
    """``close()`` (``forget_workspaces``) waits for each kept slot's stream, closes its workspace and
    leaves the pool empty; a later call makes new slots."""
    closed = []

    def close(work):  # each stream's work done before its workspace closes
        closed.append((work, all(stream.synced for stream, w in slots if w is work)))

    monkeypatch.setattr(Work, "close", close, raising=False)
    log, live = [], []
    pool.interleave(lambda item, work: _query(item, work, log, live), list(range(9)), 3)
    slots = list(pool._free)
    pool.close()
    assert sorted(id(w) for w, _ in closed) == sorted(id(w) for _, w in slots)
    assert all(synced for _, synced in closed)
    assert pool.size == 0 and not pool._free
    pool.interleave(lambda item, work: _query(item, work, log, live), [1, 2], 2)
    assert pool.size == 2 and not {id(w) for _, w in pool._free} & {id(w) for _, w in slots}


def test_exhaust_returns_the_generators_value():
    def gen():
        yield
        yield
        return 42

    assert st.exhaust(gen()) == 42
