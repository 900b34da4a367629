"""The progress protocol of long operators: an optional ``progress(done, total, unit)`` callable.

Operators whose single call can run long (``build_ppr_index``'s walks, IMM's RR samples, a batch of
``ppr``, ``simrank_topk`` or ``topk_ppr`` sources) take ``progress=None``, keyword-only, and call it at
the natural boundaries of their loops with counts of ``unit`` (``"walks"``, ``"sources"``, ...): for one
``unit`` and ``total``, ``done`` never decreases and the last call has ``done == total``. Calls are as
cheap as the caller makes them: the callable rates itself (it is called often, possibly from several
threads of one batch at once, never twice at once by one operator).

A count inside one item of an outer loop (the samples of one source of a batch) names the item:
``within(unit, i, n, item)`` is ``"samples, source 3/10"`` for the 3rd of 10 sources, and ``share`` reads
the whole loop's share done from such a report.

``unit == COMPILE`` announces one-time compilation: ``(0, 1, COMPILE)`` before the first call of a
process compiles the operator's Numba functions (or CUDA kernels), ``(1, 1, COMPILE)`` after.
"""

from __future__ import annotations

import contextlib
import re

COMPILE = "compile"
_WITHIN = re.compile(r", \w+ (\d+)/(\d+)$")


def report(progress, done: int, total: int, unit: str) -> None:
    """``progress(done, total, unit)``, where a callable was given."""
    if progress is not None:
        progress(int(done), int(total), unit)


@contextlib.contextmanager
def compiling(progress):
    """Announce the one-time compilation that runs in the block (``COMPILE``)."""
    report(progress, 0, 1, COMPILE)
    yield
    report(progress, 1, 1, COMPILE)


def within(unit: str, index: int, count: int, item: str) -> str:
    """The unit of a count inside item ``index`` (from 0) of ``count``: ``"samples, source 3/10"``."""
    return f"{unit}, {item} {index + 1}/{count}"


def share(done: int, total: int, unit: str) -> float:
    """The share of the work done that a report states, in [0, 1]; for a unit of ``within``, the share of
    the outer loop (the items before, and this one's share)."""
    part = done / total if total else 1.0
    m = _WITHIN.search(unit)
    if m is None:
        return part
    index, count = int(m.group(1)), int(m.group(2))
    return (index - 1 + part) / count if count else 1.0
