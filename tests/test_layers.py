"""Layering: graphs <- operators <- pipelines; cluster beside pipelines, importing only graphs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graphs", "operators", "pipelines", "cluster")
# what each package may import of the others and of Dask (besides the standard library and third parties)
FORBIDDEN = {
    "graphs": {"operators", "pipelines", "cluster", "distributed", "dask_cuda"},
    "operators": {"pipelines", "cluster", "dask", "distributed", "dask_cuda"},
    "cluster": {"operators", "pipelines"},
    "pipelines": set(),
}


def imported(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (absolute or relative)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.add(package.split(".")[0])
            elif node.module:
                names.add(node.module.split(".")[0])
    return names


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_imports_a_layer_above_it(package):
    bad = {
        f"{p.relative_to(ROOT)}: {sorted(imported(p) & FORBIDDEN[package])}"
        for p in modules(package)
        if imported(p) & FORBIDDEN[package]
    }
    assert not bad


def test_operators_has_a_package_per_algorithm_and_no_flat_algorithm_modules():
    top = {p.name for p in (ROOT / "operators").glob("*.py")}
    assert top <= {
        "__init__.py",
        "options.py",
        "errors.py",
        "_checks.py",
        "_cpu_threads.py",
        "_progress.py",
        "_ranked.py",
    }
    packages = {p.parent.name for p in (ROOT / "operators").glob("*/__init__.py")}
    assert {"pagerank", "ppr", "topk", "influence", "simrank", "_gpu"} <= packages


def test_the_top_level_packages_form_no_cycle():
    edges = {
        package: {name for p in modules(package) for name in imported(p)} & set(PACKAGES) - {package}
        for package in PACKAGES
    }

    def reaches(a, b, seen=()):
        return b in edges[a] or any(c not in seen and reaches(c, b, (*seen, c)) for c in edges[a])

    assert not [p for p in PACKAGES if reaches(p, p)]
