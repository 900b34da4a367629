"""The progress protocol of long operators: an optional ``progress(done, total, unit)`` callable.

Operators whose single call can run long (``build_ppr_index``'s walks, IMM's RR samples, a batch of
``ppr``, ``simrank_topk`` or ``topk_ppr`` sources) take ``progress=None``, keyword-only, and call it at
the natural boundaries of their loops with counts of ``unit`` (``"walks"``, ``"sources"``, ...): for one
``unit`` and ``total``, ``done`` never decreases and the last call has ``done == total``. Calls are as
cheap as the caller makes them: the callable rates itself (it is called often, possibly from several
threads of one batch at once, never twice at once by one operator).

``unit == COMPILE`` announces one-time compilation: ``(0, 1, COMPILE)`` before the first call of a
process compiles the operator's Numba functions (or CUDA kernels), ``(1, 1, COMPILE)`` after.
"""

from __future__ import annotations

import contextlib

COMPILE = "compile"


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
