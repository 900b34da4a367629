"""What every GPU top-k query of one index reads of it and none writes, built once per index.

Alg. 4's passes (``_topk_gpu_bound``, ``_topk_gpu_entries``) read these, shared by every stream's workspace
(``round_constants``): each H entry is one 32-bit word, the H vertex in the low bits and the walks'
count above (``pack_entries``; 8 bytes in two arrays before), and each start vertex's list start,
length, 1 / omega(v) and returned walks sit in one 32-byte record (four arrays before). With both,
candidates and Alg. 4 at R-MAT 24 top-100 took 0.42 ms instead of 0.49 (one H100).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from graphs._device import array_module, import_cupy


def pack_entries(hptr, h_end, h_freq, nh: int):
    """The H entries in one 32-bit word each, half the bytes that Alg. 4 reads (NumPy or CuPy arrays).

    A word holds the H vertex in its low ``hbits`` bits and the walks' count above them. A count too
    large for the rest is split over several entries of the same H vertex (their terms add up to the
    same sum), so a start list may grow; returns (its row pointer, the words, ``hbits``).
    """
    xp = array_module(h_end)
    hbits = max(1, int(nh - 1).bit_length())
    fmax = (1 << (32 - hbits)) - 1
    freq = h_freq
    if h_freq.size and int(h_freq.max()) > fmax:
        pieces = (h_freq.astype(xp.int64) + fmax - 1) // fmax
        hptr = hptr + xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(pieces - 1)])[hptr]
        entry = xp.repeat(xp.arange(h_freq.size, dtype=xp.int64), pieces)
        first = xp.cumsum(pieces) - pieces  # each entry's first piece; its last piece holds the rest
        last = xp.arange(entry.size, dtype=xp.int64) - first[entry] == pieces[entry] - 1
        freq = xp.where(last, h_freq[entry] - (pieces[entry] - 1) * fmax, fmax)
        h_end = h_end[entry]
    words = h_end.astype(xp.uint32) | (freq.astype(xp.uint32) << xp.uint32(hbits))
    return hptr, words, hbits


@dataclass(frozen=True)
class RoundConstants:
    """What every GPU query workspace of one index reads and none writes (``round_constants``)."""

    inv_omega: object  # 1 / omega(v), double
    lists: object  # gj_hlist records: (n, 4) int64
    h_pack: object  # pack_entries' words
    hbits: int


_BUILD = threading.Lock()


def round_constants(index) -> RoundConstants:
    """Built once per index on the GPU and kept with it, shared by the workspaces of all streams."""
    with _BUILD:
        if "_round_constants" not in index.__dict__:
            cp, a = import_cupy(), index.arrays
            # first-step walks carry the alpha share of a residue on: 1 / omega scaled by it (the
            # walk parts of the estimates, H's and the returned mass all read these weights)
            inv_omega = index.params.walk_share / a["omega"].astype(cp.float64)
            hptr, h_pack, hbits = pack_entries(a["hptr"], a["h_end"], a["h_freq"], int(a["high"].size))
            lists = cp.zeros((inv_omega.size, 4), dtype=cp.int64)
            lists[:, 0] = hptr[:-1]
            lists[:, 1] = inv_omega.view(cp.int64)
            lists[:, 2] = cp.diff(hptr)
            lists[:, 3] = a["ret"]  # an int in the low half (little-endian)
            index.__dict__["_round_constants"] = RoundConstants(inv_omega, lists, h_pack, hbits)
    return index.__dict__["_round_constants"]
