"""The one import name: ``import graphjobs`` exposes the version, the operators, jobs and cluster helpers."""

from __future__ import annotations

import doctest
import importlib.metadata
import subprocess
import sys

import numpy as np
import pytest

import graphjobs
import graphs
import operators
import pipelines


def test_version_is_the_installed_distributions():
    assert graphjobs.__version__ == importlib.metadata.version("graphjobs")
    assert graphjobs.__version__.count(".") >= 1


@pytest.mark.parametrize("name", graphjobs.__all__)
def test_every_public_name_resolves_to_its_package_object(name):
    obj = getattr(graphjobs, name)
    if name == "__version__":
        return
    if name == "distributed":
        assert obj is sys.modules["pipelines.distributed"]
        return
    home = [m for m in (graphs, operators, pipelines) if getattr(m, name, None) is obj]
    if not home:
        import cluster

        assert getattr(cluster, name) is obj
    assert name in dir(graphjobs)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        graphjobs.nope  # noqa: B018


def test_import_is_light_and_the_docstring_example_runs():
    code = "import sys, graphjobs; print(sorted(m for m in ('distributed', 'cupy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # neither Dask's distributed nor CuPy on import
    assert doctest.testmod(graphjobs).failed == 0


def test_the_facade_computes_what_the_packages_compute():
    G = graphjobs.from_edges([0, 1, 2, 2, 3], [1, 2, 0, 1, 2])
    np.testing.assert_array_equal(graphjobs.pagerank(G, tol=1e-12), operators.pagerank(G, tol=1e-12))
    assert graphjobs.pagerank_job is pipelines.pagerank_job
