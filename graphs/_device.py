"""Where arrays live: lazy CuPy import, device names, moves between host and GPU.

Every package of graphjobs goes through these helpers, so CuPy is imported only when a GPU
array or ``device='gpu'`` is actually used, and a missing CuPy gives one clear error.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from typing import Any

import numpy as np

from .errors import DeviceError, MissingDependencyError, OptionError

DEVICES = ("cpu", "gpu")
_GPU_HINT = "install the GPU extra: pip install 'graphjobs[gpu]' (CuPy for your CUDA version)"


@functools.cache
def _cupy_module() -> Any | None:
    try:
        return importlib.import_module("cupy")
    except ImportError:
        return None


def import_cupy() -> Any:
    """Return the ``cupy`` module or raise ``MissingDependencyError`` (an ImportError) that says how to
    get it."""
    cp = _cupy_module()
    if cp is None:
        raise MissingDependencyError(f"this GPU code path needs CuPy, which is not installed; {_GPU_HINT}")
    return cp


@functools.cache
def gpu_count() -> int:
    """Number of CUDA devices CuPy can see (0 without CuPy or a driver)."""
    cp = _cupy_module()
    if cp is None:
        return 0
    try:
        return int(cp.cuda.runtime.getDeviceCount())
    except Exception:  # no driver, no device, or a broken CUDA install: treat as no GPU
        return 0


def gpu_available() -> bool:
    return gpu_count() > 0


def is_gpu_array(a: Any) -> bool:
    return type(a).__module__.split(".", 1)[0] == "cupy"


def array_module(a: Any) -> Any:
    """``cupy`` for CuPy arrays, ``numpy`` for everything else (like ``cupy.get_array_module``)."""
    return import_cupy() if is_gpu_array(a) else np


def device_of(a: Any) -> str:
    return "gpu" if is_gpu_array(a) else "cpu"


def resolve_device(device: str | None) -> str:
    """Turn ``'auto'``/None into ``'gpu'`` when one is usable, else ``'cpu'``; check the name.

    Raises ``OptionError`` for an unknown name, ``MissingDependencyError`` (with the install hint) for
    ``'gpu'`` without CuPy, and ``DeviceError`` for ``'gpu'`` where CuPy sees no device.
    """
    if device in (None, "auto"):
        return "gpu" if gpu_available() else "cpu"
    if device not in DEVICES:
        raise OptionError(f"device must be 'cpu', 'gpu' or 'auto', got {device!r}")
    if device == "gpu" and not gpu_available():
        import_cupy()  # raises the install hint when CuPy is missing
        raise DeviceError("device='gpu' was requested but CuPy sees no CUDA device")
    return device


_SIZE = re.compile(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)


def parse_size(text: str, name: str = "size") -> int:
    """Bytes in ``text``: a number of bytes (``300000``, ``2e9``) or one with a binary unit, its ``B`` or
    ``iB`` optional (``512K``, ``100MB``, ``2GiB``, ``1.5T``); anything else is an ``OptionError``."""
    got = _SIZE.fullmatch(text.strip())
    if got is None:
        raise OptionError(f"{name}={text!r}: expected bytes, e.g. 2e9, 100MB or 2GiB")
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[got.group(2).upper()]
    return int(float(got.group(1)) * scale)


def host_available() -> int:
    """The host's available memory (``MemAvailable``: free pages and the caches the kernel can drop),
    else its free pages."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def free_memory(device: str) -> int:
    """Bytes free to allocate on ``device``: the GPU's free memory plus CuPy's unused pool, or the host's
    available memory; ``$GRAPHJOBS_MEMORY_LIMIT`` (``parse_size``: bytes, ``100MB``, ``2GiB``) caps it."""
    if device == "gpu":
        cp = import_cupy()
        free = int(cp.cuda.runtime.memGetInfo()[0]) + int(cp.get_default_memory_pool().free_bytes())
    else:
        free = host_available()
    limit = os.environ.get("GRAPHJOBS_MEMORY_LIMIT", "").strip()
    if limit:
        free = min(free, parse_size(limit, "GRAPHJOBS_MEMORY_LIMIT"))
    return free


# Host arrays up to this size go to the GPU through CuPy's pinned staging copy (one pinned buffer as
# large as the array, kept in CuPy's pinned pool); larger ones are copied from where they are.
PINNED_COPY_MAX = 64 << 20


def to_device(a: Any, device: str) -> Any:
    """Move one array (or None) to ``device`` without copying when it is already there; a host array
    beyond PINNED_COPY_MAX bytes goes to the GPU without a second host copy of itself."""
    if a is None:
        return None
    if device == "gpu":
        cp = import_cupy()
        if is_gpu_array(a) or not isinstance(a, np.ndarray) or a.nbytes <= PINNED_COPY_MAX:
            return cp.asarray(a)
        out = cp.empty(a.shape, dtype=a.dtype)
        out.set(np.ascontiguousarray(a))
        return out
    return a.get() if is_gpu_array(a) else np.asarray(a)


def to_host(a: Any) -> Any:
    return to_device(a, "cpu")
