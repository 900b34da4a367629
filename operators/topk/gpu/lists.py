"""What every GPU top-k query of one index reads of it and none writes, built once per index.

Alg. 4's passes (``_topk_gpu_bound``, ``_topk_gpu_entries``) read these, shared by every stream's workspace
(``round_constants``): each H entry is one word, the H vertex in the low bits and the walks' count less
one above (``pack_entries``; 16 bits where |H| <= NARROW_H, else 32), and each start vertex's list
start, length, 1 / omega(v) and returned walks sit in one 32-byte record, so that one load brings what
the candidates pass and Alg. 4 read of a vertex.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphs._device import array_module, import_cupy

# H sets of up to this many vertices get 16-bit H entries: half the memory of 32-bit words and the same
# answers (Alg. 4's pass is not bound by the entries it reads). Most walk counts are 1 or 2, so the bits
# left above the H vertex hold nearly all of them; a larger count is split into several entries. The
# word holds the count less one, so that even one bit left holds a count of 2: split entries of one
# vertex lie side by side and their shared-memory adds would contend on one address. So at least one
# bit is left for it: |H| <= 2^15
NARROW_H = 1 << 15


def pack_entries(hptr, h_end, h_freq, nh: int):
    """The H entries in one word each (NumPy or CuPy arrays): 16 bits for at most NARROW_H H vertices,
    else 32, against 8 bytes in the index's two arrays.

    A word holds the H vertex in its low ``hbits`` bits and the walks' count less one above them. A
    count too large for the rest is split over several entries of the same H vertex (their terms add up
    to the same sum), so a start list may grow; returns (its row pointer, the words, ``hbits``).
    """
    xp = array_module(h_end)
    if h_freq.size and int(h_freq.min()) < 1:  # a word holds the count less one: 0 would wrap around
        raise ValueError(f"h_freq: expected walk counts of at least 1, got {int(h_freq.min())}")
    hbits = max(1, int(nh - 1).bit_length())
    bits, word = (16, xp.uint16) if nh <= NARROW_H else (32, xp.uint32)
    fmax = 1 << (bits - hbits)
    freq = h_freq
    if h_freq.size and int(h_freq.max()) > fmax:
        pieces = (h_freq.astype(xp.int64) + fmax - 1) // fmax
        hptr = hptr + xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(pieces - 1)])[hptr]
        entry = xp.repeat(xp.arange(h_freq.size, dtype=xp.int64), pieces)
        first = xp.cumsum(pieces) - pieces  # each entry's first piece; its last piece holds the rest
        last = xp.arange(entry.size, dtype=xp.int64) - first[entry] == pieces[entry] - 1
        freq = xp.where(last, h_freq[entry] - (pieces[entry] - 1) * fmax, fmax)
        h_end = h_end[entry]
    words = h_end.astype(xp.uint32) | ((freq.astype(xp.uint32) - xp.uint32(1)) << xp.uint32(hbits))
    return hptr, words.astype(word), hbits


@dataclass(frozen=True)
class RoundConstants:
    """What every GPU query workspace of one index reads and none writes (``round_constants``)."""

    inv_omega: object  # 1 / omega(v), double
    lists: object  # gj_hlist records: (n, 4) int64
    h_pack: object  # pack_entries' words
    hbits: int


def round_constants(index) -> RoundConstants:
    """Built once per index on the GPU and kept with it, shared by the workspaces of all streams."""

    def make() -> RoundConstants:
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
        return RoundConstants(inv_omega, lists, h_pack, hbits)

    return index.cache.setdefault("round_constants", make)
