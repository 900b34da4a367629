"""The current GPU's sizes, asked of the device once per process and device, never assumed: streaming
multiprocessors, L2 cache, shared memory. Also the CuPy import helper (``import_cupy``)."""

from __future__ import annotations

from graphs._device import import_cupy
from graphs._kernel import device_attribute, sm_count

__all__ = ["device_attribute", "import_cupy", "l2_cache_bytes", "shared_memory_optin", "sm_count"]


def l2_cache_bytes() -> int:
    """Bytes of L2 cache of the current GPU."""
    return device_attribute("L2CacheSize")


def shared_memory_optin() -> int:
    """Most shared memory (bytes) one block may opt in to on the current GPU."""
    return device_attribute("MaxSharedMemoryPerBlockOptin")


def shared_memory_per_sm() -> int:
    """Shared memory (bytes) of one streaming multiprocessor of the current GPU."""
    return device_attribute("MaxSharedMemoryPerMultiprocessor")
