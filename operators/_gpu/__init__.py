"""The GPU runtime of the operators: the CuPy import helper, the kernel registry (``registry``), launch,
occupancy, L2 and timing helpers (``launch``), device sizes (``device``), block-wide CUDA helpers
(``blocks``) and concurrent query streams (``streams``)."""

from operators._gpu.device import import_cupy, l2_cache_bytes, shared_memory_optin, sm_count
from operators._gpu.launch import event_seconds, l2_fetch_granularity, launch_config, resident_blocks
from operators._gpu.registry import Kernel, all_kernels

__all__ = [
    "Kernel",
    "all_kernels",
    "event_seconds",
    "import_cupy",
    "l2_cache_bytes",
    "l2_fetch_granularity",
    "launch_config",
    "resident_blocks",
    "shared_memory_optin",
    "sm_count",
]
