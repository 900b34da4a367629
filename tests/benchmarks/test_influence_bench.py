"""The IMM benchmark's baseline, interrupted by STEP_TIMEOUT's SIGINT, is recorded as a lower bound:
``_interrupted`` recognises the interrupt also where Numba re-raises it as a SystemError."""

from __future__ import annotations

import pytest

from benchmarks.influence import _interrupted


def _raised(make):
    try:
        make()
    except BaseException as exc:  # the test inspects what was raised
        return exc
    pytest.fail("nothing raised")


def _numba_style():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as k:
        raise SystemError("CPUDispatcher(<function _greedy>) returned a result with an exception set") from k


def _unrelated():
    try:
        raise ValueError("bad")
    except ValueError as v:
        raise SystemError("returned a result with an exception set") from v


def test_an_interrupt_is_recognised_directly_and_behind_numbas_system_error():
    assert _interrupted(KeyboardInterrupt())
    assert _interrupted(_raised(_numba_style))
    assert not _interrupted(_raised(_unrelated))
    assert not _interrupted(SystemError("x"))
