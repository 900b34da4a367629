"""The registry of every CUDA kernel of graphjobs.

Each module that launches GPU code declares its sources as ``Kernel(source, names, defines=...,
variants=..., spill_budget=..., local_budget=..., options=..., cooperative=...)`` at import, right
above the wrapper that launches them, and launches ``kernel.get(name, **variant)`` (a CuPy RawKernel,
made once per process). Python constants reach the CUDA source only as ``-D NAME=value`` defines, so
each is written once; ``#define`` lines in sources are CUDA-only macros.

Where the declaration lives: ``Kernel`` and the list it registers into are in ``graphs._kernel``, a
leaf module importing nothing of graphjobs but ``graphs._device``. ``graphs`` is the lowest layer and
must not import ``operators``, yet has two kernels of its own (the R-MAT generator and the array
fingerprint); with the value type below it, they are declared and registered like every other, and
this module re-exports it for ``operators``.

``all_kernels()`` imports every module of ``graphs`` and ``operators`` (registering everything) and
returns the registry: the compile test walks it instead of a list of its own.
"""

from __future__ import annotations

import importlib
import pkgutil

from graphs._kernel import Kernel, registered

__all__ = ["Kernel", "all_kernels", "registered"]

PACKAGES = ("graphs", "operators")


def all_kernels() -> tuple[Kernel, ...]:
    """Every kernel of the packages in ``PACKAGES``, each imported module by module."""
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        for info in pkgutil.walk_packages(pkg.__path__, f"{package}."):
            importlib.import_module(info.name)
    return registered()
