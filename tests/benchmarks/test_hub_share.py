"""``benchmarks.hub_share``: the forward push's edge scans, checked by hand on a toy graph."""

from __future__ import annotations

import numpy as np

from benchmarks.hub_share import push_scans


def test_push_scans_on_a_hand_traced_graph():
    # 0 -> 1, 0 -> 2, 1 -> 0, 2 -> 0; alpha 0.8, r_max 0.1, FIFO from 0. Traced by hand: 0 is pushed 4
    # times (r = 1, 0.64, 0.4096, 0.262), 1 and 2 four times each (0.4, 0.256, 0.164, 0.105); then
    # r(0) = 0.168 <= 0.1 * 2 and r(1) = r(2) = 0 stop it: scans 4 * 2, 4 * 1, 4 * 1.
    indptr, indices = np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0])
    np.testing.assert_array_equal(push_scans(indptr, indices, 0, 0.8, 0.1), [8, 4, 4])
    # a threshold above the source's residue per edge: nothing is pushed
    np.testing.assert_array_equal(push_scans(indptr, indices, 0, 0.8, 0.6), [0, 0, 0])
