"""Array operations over 2**31 elements and more, done in chunks where CuPy counts in 32 bits.

CuPy's 1-D scan (``cumsum``) passes the length as a 32-bit count: it returns wrong values from 2**31
elements (CuPy <= 13.3) or 2**32 (CuPy 13.4 to 14.0), and boolean-mask indexing raises ``OverflowError``
once 2**31 elements are selected (every version so far). A graph of R-MAT scale 27 has 2**31 edges, so
every scan or selection over edges, walks or pairs goes through these, which work on any length, on
NumPy and CuPy arrays alike.
"""

from __future__ import annotations

import numpy as np

from ._device import array_module
from .errors import MissingDependencyError

CHUNK = 1 << 30  # elements of one CuPy call; below CuPy's 32-bit counts with room to spare


def cumsum(a, *, dtype=None):
    """Inclusive prefix sum of the 1-D array ``a`` (``numpy.cumsum``'s result and dtype), computed in
    chunks of ``CHUNK`` elements, each offset by the total before it (on the device, without a sync)."""
    xp = array_module(a)
    if a.size <= CHUNK:
        return xp.cumsum(a, dtype=dtype)
    dtype = xp.cumsum(a[:1], dtype=dtype).dtype
    out = xp.empty(a.size, dtype=dtype)
    for s in range(0, a.size, CHUNK):
        e = min(s + CHUNK, a.size)
        xp.cumsum(a[s:e], dtype=dtype, out=out[s:e])
        if s:
            out[s:e] += out[s - 1]
    return out


def compress(a, mask):
    """``a[mask]`` for a 1-D array and a boolean mask of its length, in chunks of ``CHUNK``."""
    xp = array_module(a)
    if a.size <= CHUNK:
        return a[mask]
    parts = [a[s : s + CHUNK][mask[s : s + CHUNK]] for s in range(0, a.size, CHUNK)]
    return xp.concatenate(parts) if parts else a[:0]


def check_unique_size(xp, size: int) -> None:
    """``cupy.unique(..., return_inverse=True)`` scans its input in one call: refuse, naming the CuPy
    version, a length that version scans wrongly (2**31 elements and more before CuPy 14.1)."""
    if xp is np or size < 2**31:
        return
    version = tuple(int(p) for p in xp.__version__.split(".")[:2] if p.isdigit())
    if version < (14, 1):
        raise MissingDependencyError(
            f"relabelling {size:,} vertex ids on the GPU needs CuPy >= 14.1 (found {xp.__version__}, whose "
            "scan of 2**31 elements or more is wrong); upgrade CuPy, or read the file on the CPU"
        )
