"""Top k entries per row (the ``topk=`` results of ``ppr``): a full sort is the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from operators.ppr.top_rows import CHUNKS_PER_K, RANK_BITS, top_entries


def _key(row):  # the value to RANK_BITS significant bits, rounded toward zero (math.frexp, by hand)
    m, e = np.frexp(row.astype(np.float64))
    return np.ldexp(np.trunc(m * 2.0**RANK_BITS), e - RANK_BITS)


def _oracle(block, k):
    verts, vals = [], []
    for row in block:
        order = np.lexsort((np.arange(row.size), -_key(row)))[:k]  # largest first, ties to the smaller column
        real = row[order] > 0  # only positive entries are listed: column -1 and value 0 after them
        verts.append(np.where(real, order, -1))
        vals.append(np.where(real, row[order], 0))
    return np.array(verts), np.array(vals)


def _blocks(rng):
    n = 2 * CHUNKS_PER_K * 50 + 37  # long enough for the GPU's chunk bound at k <= 50
    heavy = rng.pareto(1.5, size=(4, n)) * (rng.random((4, n)) < 0.3)  # power law, 70% zeros
    heavy[1, ::7] = heavy[1, 3]  # many ties
    heavy[2] = 0.0
    heavy[2, [5, 900, 77]] = [0.5, 0.25, 0.5]  # fewer positives than k: padding follows
    heavy[3] = np.round(heavy[3], 1)  # ties everywhere
    # values equal but for their last bits tie (as one PPR row from two batches may come out); the
    # larger ones at the larger columns, so that ranking by the exact value would give other columns
    near = np.sort(heavy[0][heavy[0] > 0])[-40:]
    cols = np.sort(rng.choice(n, size=80, replace=False))
    heavy[0, cols[:40]] = near
    heavy[0, cols[40:]] = near * (1 + 2.0**-40)
    small = rng.random((3, 60)) * (rng.random((3, 60)) < 0.5)
    return [heavy, heavy.astype(np.float32), small]


def test_values_equal_but_for_their_last_bits_tie():
    """Ranked to RANK_BITS significant bits: a value above another only in its last bits still goes after
    it when its column is larger (ties to the smaller column), and each keeps its own value."""
    row = np.zeros((1, 10))
    row[0, [2, 5, 8]] = [0.3, 0.3 * (1 + 2.0**-45), 0.3 * (1 + 2.0**-20)]
    verts, vals = top_entries(row, 3)
    assert verts[0].tolist() == [8, 2, 5]
    assert vals[0].tolist() == [row[0, 8], row[0, 2], row[0, 5]]
    assert _key(row[0])[2] == _key(row[0])[5] != _key(row[0])[8]


@pytest.mark.parametrize("k", [1, 10, 50])
def test_cpu_top_entries_match_a_full_sort(k):
    for block in _blocks(np.random.default_rng(k)):
        verts, vals = top_entries(block, k)
        want_v, want_x = _oracle(block, k)
        np.testing.assert_array_equal(verts, want_v)
        np.testing.assert_array_equal(vals, want_x)
        short = (block > 0).sum(axis=1) < k  # (row 2 of the heavy blocks from k = 10)
        assert (verts[short] == -1).any(axis=1).all() and (vals[verts >= 0] > 0).all()
        assert (vals[verts == -1] == 0).all() and (
            (verts >= 0).sum(axis=1) == np.minimum(k, (block > 0).sum(1))
        ).all()


@pytest.mark.gpu
@pytest.mark.parametrize(("k", "slots"), [(1, None), (10, None), (50, None), (10, 1), (50, 1)])
def test_gpu_top_entries_match_the_cpu(k, slots, monkeypatch):
    """With the default candidate slots, and with k slots a row, where rows of ties or of many entries at
    the bound overflow them and are redone from the mask."""
    import cupy as cp

    from operators.ppr import top_rows as _top_rows

    if slots is not None:
        monkeypatch.setattr(_top_rows, "CAP_PER_K", slots)

    for block in [*_blocks(np.random.default_rng(k)), _near_ties()]:
        verts, vals = top_entries(cp.asarray(block), k)
        want_v, want_x = top_entries(block, k)  # the CPU's, padding included
        np.testing.assert_array_equal(verts, want_v)
        np.testing.assert_array_equal(vals, want_x)
        strided = cp.zeros((block.shape[0], block.shape[1] + 13), dtype=block.dtype)  # a view, as ppr's rows
        strided[:, : block.shape[1]] = cp.asarray(block)
        np.testing.assert_array_equal(top_entries(strided[:, : block.shape[1]], k)[0], want_v)


def _near_ties():
    """A row of many values equal but for their last bits, long enough for the GPU's chunk bound."""
    row = np.zeros((2, 2 * CHUNKS_PER_K * 50 + 5))
    row[0, ::3] = 0.125 * (1 + np.arange(row[0, ::3].size) % 7 * 2.0**-44)
    row[1, ::5] = 0.25 / (1 + np.arange(row[1, ::5].size) % 3 * 2.0**-50)
    return row
