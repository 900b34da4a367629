"""Kernel arguments kept by a part of a GPU top-k query workspace (``GPUQuery``), made once per key."""

from __future__ import annotations


class LaunchArgs:
    """What ``make()`` returns (a kernel's arguments, or parts of them), kept per ``key``: a round launches
    without slicing, viewing or converting its buffers again (a CuPy slice costs a sizeable share of a
    launch's host time). The arguments hold the part's buffers: ``close()`` drops them with it."""

    __slots__ = ("_made",)

    def __init__(self) -> None:
        self._made: dict = {}

    def get(self, key, make):
        got = self._made.get(key)
        if got is None:
            got = self._made[key] = make()
        return got

    def close(self) -> None:
        self._made.clear()
