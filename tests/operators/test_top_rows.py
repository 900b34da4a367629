"""Top k entries per row (the ``topk=`` results of ``ppr``): a full sort is the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from operators._top_rows import CHUNKS_PER_K, _top_cpu, top_entries


def _oracle(block, k):
    verts, vals = [], []
    for row in block:
        order = np.lexsort((np.arange(row.size), -row))[:k]  # largest first, ties to the smaller column
        verts.append(order)
        vals.append(row[order])
    return np.array(verts), np.array(vals)


def _blocks(rng):
    n = 2 * CHUNKS_PER_K * 50 + 37  # long enough for the GPU's chunk bound at k <= 50
    heavy = rng.pareto(1.5, size=(4, n)) * (rng.random((4, n)) < 0.3)  # power law, 70% zeros
    heavy[1, ::7] = heavy[1, 3]  # many ties
    heavy[2] = 0.0
    heavy[2, [5, 900, 77]] = [0.5, 0.25, 0.5]  # fewer positives than k: zeros by column follow
    heavy[3] = np.round(heavy[3], 1)  # ties everywhere
    small = rng.random((3, 60)) * (rng.random((3, 60)) < 0.5)
    return [heavy, heavy.astype(np.float32), small]


@pytest.mark.parametrize("k", [1, 10, 50])
def test_cpu_top_entries_match_a_full_sort(k):
    for block in _blocks(np.random.default_rng(k)):
        verts, vals = top_entries(block, k)
        want_v, want_x = _oracle(block, k)
        np.testing.assert_array_equal(verts, want_v)
        np.testing.assert_array_equal(vals, want_x)


@pytest.mark.gpu
@pytest.mark.parametrize(("k", "slots"), [(1, None), (10, None), (50, None), (10, 1), (50, 1)])
def test_gpu_top_entries_match_the_cpu(k, slots, monkeypatch):
    """With the default candidate slots, and with k slots a row, where rows of ties or of many entries at
    the bound overflow them and are redone from the mask."""
    import cupy as cp

    from operators import _top_rows

    if slots is not None:
        monkeypatch.setattr(_top_rows, "CAP_PER_K", slots)

    for block in _blocks(np.random.default_rng(k)):
        verts, vals = top_entries(cp.asarray(block), k)
        want_v, want_x = _top_cpu(block, k)
        np.testing.assert_array_equal(verts, want_v)
        np.testing.assert_array_equal(vals, want_x)
        strided = cp.zeros((block.shape[0], block.shape[1] + 13), dtype=block.dtype)  # a view, as ppr's rows
        strided[:, : block.shape[1]] = cp.asarray(block)
        np.testing.assert_array_equal(top_entries(strided[:, : block.shape[1]], k)[0], want_v)
