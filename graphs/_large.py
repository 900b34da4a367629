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

# elements of one CuPy call: below CuPy's 32-bit counts, and small enough that the call's own temporaries
# (a selection's 8-byte running count) stay at 1 GiB beside arrays of billions of elements
CHUNK = 1 << 27


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
    """``a[mask]`` for a 1-D array and a boolean mask of its length, in chunks of ``CHUNK`` written
    into the result (counted first), so that nothing but the result and one chunk's temporaries is
    made."""
    xp = array_module(a)
    if a.size <= CHUNK:
        return a[mask]
    bounds = [(lo, min(lo + CHUNK, a.size)) for lo in range(0, a.size, CHUNK)]
    counts = [int(xp.count_nonzero(mask[lo:hi])) for lo, hi in bounds]
    out, at = xp.empty(sum(counts), dtype=a.dtype), 0
    for (lo, hi), c in zip(bounds, counts, strict=True):
        out[at : at + c] = a[lo:hi][mask[lo:hi]]
        at += c
    return out


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
