"""Every CUDA kernel of the registry (``operators._gpu.registry``), in every variant it lists, compiles for
Hopper (sm_90) with no more register spills than its ``spill_budget`` (needs nvcc, not a GPU), and the
GPU's own compile (NVRTC, through CuPy) keeps each entry function's local memory within its
``local_budget`` (marked gpu; that compile differs from nvcc's for some kernels).

The registry itself is checked without a GPU: each declaration names exactly the ``gj_`` entry functions
of its source, each define is written nowhere else in it, a define named like a
constant of its module has that constant's value, and no module compiles CUDA outside the registry.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from graphs._kernel import Kernel
from operators._gpu.registry import PACKAGES, all_kernels

NVCC = shutil.which("nvcc")
ROOT = Path(__file__).resolve().parents[2]
KERNELS = tuple(k for k in all_kernels() if k.module.split(".")[0] in PACKAGES)
VARIANTS = [(k, v) for k in KERNELS for v in k.variants]
VARIANT_IDS = [f"{k.label}-{i}" for k in KERNELS for i in range(len(k.variants))]
# an entry function, the names made by token pasting (``gj_ppr_solve_##S``) as their prefix
ENTRY = re.compile(
    r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s+)?(?:\w+\s+)?(gj_\w+?)(##\w+)?\s*\('
)
DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)(?:\s+(\S+))?", re.M)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize(("kernel", "variant"), VARIANTS, ids=VARIANT_IDS)
def test_kernel_compiles_without_spills(tmp_path, kernel, variant):
    src = tmp_path / f"{kernel.label}.cu"
    src.write_text(kernel.source)
    command = [NVCC, "-arch=sm_90", *kernel.compile_options(**variant), "-cubin", "-Xptxas", "-v"]
    out = subprocess.run(
        [*command, "-o", str(tmp_path / "k.cubin"), str(src)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = out.stderr
    for name in kernel.names:
        assert f"Compiling entry function '{name}'" in report
    props = r"Function properties for (\w+)\n\s*\d+ bytes stack frame, (\d+) bytes spill stores"
    found = re.findall(props, report)
    assert {name for name, _ in found} >= set(kernel.names), report
    for name, spill in found:
        assert int(spill) <= kernel.spill_budget.get(name, 0), f"{name}: {spill} bytes of spills\n{report}"


@pytest.mark.gpu
@pytest.mark.parametrize(("kernel", "variant"), VARIANTS, ids=VARIANT_IDS)
def test_kernel_local_memory_as_compiled_on_the_gpu(kernel, variant):
    local = {n: kernel.get(n, **variant).attributes["local_size_bytes"] for n in kernel.names}
    over = {n: b for n, b in local.items() if b > kernel.local_budget.get(n, 0)}
    assert not over, f"bytes of local memory per thread over budget: {over} (all: {local})"


def test_the_registry_holds_every_kernel_package():
    modules = {k.module for k in KERNELS}
    assert {"graphs._mix", "graphs.generators"} <= modules
    for package in ("pagerank", "ppr", "topk", "influence", "simrank"):
        assert any(m.startswith(f"operators.{package}.") for m in modules), package
    labels = [k.label for k in KERNELS]
    assert len(labels) == len(set(labels))


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.label for k in KERNELS])
def test_a_declaration_names_exactly_the_entry_functions_of_its_source(kernel):
    entries = ENTRY.findall(kernel.source)
    exact = {name for name, pasted in entries if not pasted}
    prefixes = {name for name, pasted in entries if pasted}
    assert exact | prefixes, kernel.label
    assert all(n.startswith("gj_") for n in kernel.names)
    assert exact <= set(kernel.names), exact - set(kernel.names)
    for name in kernel.names:
        assert name in exact or any(name.startswith(p) for p in prefixes), f"{kernel.label}: {name}"
    for prefix in prefixes:
        assert any(n.startswith(prefix) for n in kernel.names), f"{kernel.label}: {prefix}##"


def test_no_entry_function_is_declared_twice():
    names = [n for k in KERNELS for n in k.names]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.label for k in KERNELS])
def test_defines_are_written_once(kernel):
    written = {name for name, _ in DEFINE.findall(kernel.source)}
    keys = set(kernel.defines) | {key for v in kernel.variants for key in v}
    assert not keys & written, f"{kernel.label}: #define in the source and -D both: {keys & written}"
    for v in kernel.variants:  # a variant's set is whole: it gives every key any other variant gives
        assert set(v) == set(kernel.variants[0]), kernel.label


def _int_constants(module: str) -> dict[str, int]:
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    out = {}
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target, value in _pairs(targets, getattr(node, "value", None)):
            try:
                v = ast.literal_eval(value)
            except ValueError:
                continue
            if isinstance(target, ast.Name) and target.id.isupper() and type(v) is int:
                out[target.id] = v
    return out


def _pairs(targets, value):
    for t in targets:
        if isinstance(t, ast.Tuple) and isinstance(value, ast.Tuple) and len(t.elts) == len(value.elts):
            yield from zip(t.elts, value.elts, strict=True)
        else:
            yield t, value


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.label for k in KERNELS])
def test_a_define_named_like_a_python_constant_has_its_value(kernel):
    import importlib

    module = importlib.import_module(kernel.module)
    for key, value in {**kernel.defines, **kernel.variants[0]}.items():
        for name in (key, key.removeprefix("GJ_")):
            python = getattr(module, name, None)
            if type(python) is int and name.isupper():
                got = _c_int(value)
                assert got == python, f"{kernel.label}: -D{key}={value}, {kernel.module}.{name} = {python}"


def _c_int(value) -> int | None:
    """A define's value as an integer (a C literal such as ``0x9E37ULL`` too), else None."""
    if isinstance(value, int):
        return int(value)
    try:
        return int(str(value).rstrip("uUlL"), 0)
    except ValueError:
        return None


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.label for k in KERNELS])
def test_no_source_writes_a_python_constant_of_its_module_as_a_define(kernel):
    constants = _int_constants(kernel.module)
    for name, value in DEFINE.findall(kernel.source):
        python = constants.get(name, constants.get(name.removeprefix("GJ_")))
        assert python is None, f"{kernel.label}: #define {name} {value} beside {kernel.module}'s {python}"


def test_cuda_is_built_only_through_the_registry():
    """``RawKernel``, ``RawModule`` and ``get_kernel`` are called only in the registry's module; no source is
    assembled from f-string ``#define`` lines; no SM count is written out."""
    allowed = {ROOT / "graphs" / "_kernel.py"}
    bad = []
    for package in (*PACKAGES, "pipelines", "cluster", "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            if path not in allowed and re.search(r"\b(RawKernel|RawModule|get_kernel)\s*\(", text):
                bad.append(f"{path.relative_to(ROOT)}: compiles CUDA")
            if re.search(r"""\bf(["'])[^\n]*#define""", text):
                bad.append(f"{path.relative_to(ROOT)}: f-string #define")
            if re.search(r"max_blocks=\d+ \*", text):
                bad.append(f"{path.relative_to(ROOT)}: a written-out SM count")
    assert not bad, bad


def test_defines_reach_the_compiler_as_options():
    k = Kernel('extern "C" __global__ void gj_t(IDX* x) { x[0] = N; }', "gj_t", defines={"N": 3, "F": True})
    assert k.names == ("gj_t",) and k.label == "gj_t" and k.module == __name__
    assert k.compile_options() == ("-std=c++17", "-DN=3", "-DF=1")
    assert k.define_options(IDX="long long", N=4) == ("-DN=4", "-DF=1", "-DIDX=long long")
    with pytest.raises(KeyError):
        k.get("gj_other")
    with pytest.raises(ValueError, match="gj_"):
        Kernel("", ("t",))
    with pytest.raises(ValueError, match="macro"):
        Kernel("", ("gj_t",), defines={"A B": 1})
