"""benchmarks.pagerank._row_blocks: how the cuSPARSE baseline cuts a matrix of more than 2**31 - 1 edges
into row blocks that CuPy's 32-bit CSR matrices hold; the blocks' products, put side by side, are the
whole matrix's product (SciPy as the oracle)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from benchmarks.pagerank import _row_blocks


@pytest.mark.parametrize(("n", "most"), [(1000, 300), (50, 10**9), (200, 7)])
def test_row_blocks_cover_every_row_within_the_cap_and_multiply_as_the_whole(n, most):
    A = sp.random(n, n, density=0.05, random_state=1, format="csr")
    blocks = _row_blocks(A.indptr, most)
    assert blocks[0][0] == 0 and blocks[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    assert all(A.indptr[hi] - A.indptr[lo] <= most or hi - lo == 1 for lo, hi in blocks)
    x = np.random.default_rng(0).random(n)
    y = np.empty(n)
    for lo, hi in blocks:
        s, e = A.indptr[lo], A.indptr[hi]
        block = sp.csr_matrix((A.data[s:e], A.indices[s:e], A.indptr[lo : hi + 1] - s), shape=(hi - lo, n))
        y[lo:hi] = block @ x
    np.testing.assert_allclose(y, A @ x, rtol=1e-12)
    if most >= A.nnz:
        assert blocks == [(0, n)]


def test_a_row_longer_than_the_cap_is_a_block_alone():
    indptr = np.array([0, 2, 12, 13])  # row 1 holds 10 entries, the cap is 4
    assert _row_blocks(indptr, 4) == [(0, 1), (1, 2), (2, 3)]
