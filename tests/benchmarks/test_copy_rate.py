"""benchmarks.common.copy_rate, the yardstick the PageRank benchmark states its bandwidth fraction
against: measured on the GPU that runs, so it must lie below that GPU's theoretical memory bandwidth
(clock x bus width, both directions of a copy counted) and near it (HBM copies reach well over half)."""

from __future__ import annotations

import pytest

from benchmarks.common import copy_rate


@pytest.mark.gpu
def test_the_copy_rate_is_a_share_of_the_gpus_theoretical_bandwidth():
    import cupy as cp

    dev = cp.cuda.Device().id
    clock_khz = cp.cuda.runtime.deviceGetAttribute(36, dev)  # cudaDevAttrMemoryClockRate
    bus_bits = cp.cuda.runtime.deviceGetAttribute(37, dev)  # cudaDevAttrGlobalMemoryBusWidth
    peak = 2 * clock_khz * 1e3 * bus_bits / 8  # HBM transfers twice a clock
    rate = copy_rate(nbytes=2**30, repeats=10)
    assert 0.5 * peak < rate <= 1.02 * peak, (rate / 1e12, peak / 1e12)
