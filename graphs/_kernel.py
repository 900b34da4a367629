"""The ``Kernel`` declaration of the GPU kernel registry, the registry itself (a list), and the launch
basics a kernel of ``graphs`` needs (``launch_config``, cached device attributes such as ``sm_count``).

A leaf module: it imports only ``graphs._device``, so that ``graphs`` (the lowest layer, which must not
import ``operators``) declares and launches its own two kernels with it. ``operators._gpu`` re-exports
all of it (``operators._gpu.registry``, ``operators._gpu.launch``, ``operators._gpu.device``); operator
code imports it from there.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._device import import_cupy

DEFAULT_OPTIONS = ("-std=c++17",)
_NAME = re.compile(r"[A-Za-z_]\w*\Z")
_REGISTRY: list[Kernel] = []


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(mapping or {})


@dataclass(frozen=True, eq=False)
class Kernel:
    """One CUDA source and the ``extern "C" __global__`` entry functions (``names``, each ``gj_...``)
    it defines, registered on construction (once, at import of the module that launches them).

    ``defines``: the Python constants the source uses, passed to the compiler as ``-D NAME=value``
    (values are ``int`` or a ``str`` of CUDA text). ``variants``: define sets that select one variant
    of the source (a value type, an index type, a tuning parameter); ``get`` takes one as keyword
    arguments, and the compile test builds every set listed here (``({},)`` when the source has none).
    ``spill_budget`` / ``local_budget``: bytes of register spill stores (nvcc for sm_90) and of local
    memory per thread (the GPU's own compile) an entry function may have, 0 for those not named; keys
    are entry names or mangled names of non-inlined device functions. ``options``: other compiler
    options. ``cooperative``: its entry functions are launched with cuLaunchCooperativeKernel
    (grid-wide barriers allowed). ``label``: a short name for tests and errors (the first entry name
    by default). ``module``: the module that declared it (set on construction).
    """

    source: str
    names: tuple[str, ...]
    defines: Mapping[str, Any] = field(default_factory=dict)
    variants: tuple[Mapping[str, Any], ...] = ({},)
    spill_budget: Mapping[str, int] = field(default_factory=dict)
    local_budget: Mapping[str, int] = field(default_factory=dict)
    options: tuple[str, ...] = DEFAULT_OPTIONS
    cooperative: bool = False
    label: str = ""

    def __post_init__(self):
        names = (self.names,) if isinstance(self.names, str) else tuple(self.names)
        if not names or any(not n.startswith("gj_") for n in names):
            raise ValueError(f"kernel names must start with 'gj_': {names}")
        set_ = functools.partial(object.__setattr__, self)
        set_("names", names)
        set_("defines", _frozen(self.defines))
        set_("variants", tuple(_frozen(v) for v in self.variants) or ({},))
        set_("spill_budget", _frozen(self.spill_budget))
        set_("local_budget", _frozen(self.local_budget))
        set_("options", tuple(self.options))
        set_("label", self.label or names[0])
        for key in (*self.defines, *(k for v in self.variants for k in v)):
            if not _NAME.match(key):
                raise ValueError(f"{self.label}: {key!r} is not a macro name")
        set_("module", sys._getframe(2).f_globals.get("__name__", ""))  # the caller of __init__
        set_("_compiled", {})
        _REGISTRY.append(self)

    def define_options(self, **variant: Any) -> tuple[str, ...]:
        """The ``-D NAME=value`` options of ``defines`` updated by ``variant`` (a bool is written 0 or 1)."""
        return tuple(
            f"-D{k}={int(v) if isinstance(v, bool) else v}" for k, v in {**self.defines, **variant}.items()
        )

    def compile_options(self, **variant: Any) -> tuple[str, ...]:
        """Every compiler option of one variant: ``options``, then its defines."""
        return self.options + self.define_options(**variant)

    def get(self, name: str, **variant: Any) -> Any:
        """The CuPy RawKernel ``name`` of the variant ``variant`` (define values), made once per process;
        CuPy compiles it on its first launch on each device and keeps the binary in its disk cache."""
        key = (name, *variant.items()) if variant else name
        kernel = self._compiled.get(key)
        if kernel is None:
            if name not in self.names:
                raise KeyError(f"{self.label} declares no kernel {name!r} (it has {self.names})")
            kernel = _raw_kernel(self.source, name, self.compile_options(**variant), self.cooperative)
            self._compiled[key] = kernel
        return kernel


@functools.cache
def _raw_kernel(source: str, name: str, options: tuple[str, ...], cooperative: bool) -> Any:
    return import_cupy().RawKernel(source, name, options=options, enable_cooperative_groups=cooperative)


def launch_config(n_items: int, threads: int = 256, max_blocks: int = 65535 * 32) -> tuple[tuple, tuple]:
    """Grid and block tuples for a 1-D launch over ``n_items`` (at least one block)."""
    blocks = max(1, min(max_blocks, (int(n_items) + threads - 1) // threads))
    return (blocks,), (threads,)


def device_attribute(name: str) -> int:
    """CUDA device attribute ``name`` (CuPy's spelling, e.g. ``'MultiProcessorCount'``) of the current GPU,
    asked once per device."""
    return _attribute(name, import_cupy().cuda.Device().id)


@functools.cache
def _attribute(name: str, device: int) -> int:
    return int(import_cupy().cuda.Device(device).attributes[name])


def sm_count() -> int:
    """Streaming multiprocessors of the current GPU."""
    return device_attribute("MultiProcessorCount")


def registered() -> tuple[Kernel, ...]:
    """Every ``Kernel`` made so far in this process, in the order of construction."""
    return tuple(_REGISTRY)
