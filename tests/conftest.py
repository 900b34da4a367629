"""Shared fixtures: devices, the SNAP datasets (skipped when absent), NetworkX oracles."""

from __future__ import annotations

import functools
import io
import os
from pathlib import Path

import numpy as np
import pytest

import graphs
from graphs._device import gpu_available, to_host

ROOT = Path(__file__).resolve().parents[1]


def child_env(**extra: str) -> dict:
    """The environment for a Python child process of a test: this one's, with the repository first on
    PYTHONPATH (before what is there: the GPU machine finds Dask and CuPy's wheels through it), plus
    ``extra``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


DATASET_DIRS = [os.environ.get("GRAPHJOBS_DATASETS", ""), ROOT.parent / "shared" / "datasets", ROOT / ".data"]

# Run a test on the CPU always and, marked `gpu`, on the GPU.
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("gpu", id="gpu", marks=pytest.mark.gpu)]


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def dataset_path(name: str) -> Path | None:
    for d in DATASET_DIRS:
        if d and (Path(d) / name).is_file():
            return Path(d) / name
    return None


@functools.cache
def snap(name: str, directed: bool = True, dedupe: bool = False) -> graphs.CSRGraph:
    path = dataset_path(f"{name}.txt.gz")
    if path is None:
        pytest.skip(f"dataset {name} not found (set GRAPHJOBS_DATASETS or provide ../shared/datasets)")
    return graphs.read_edgelist(path, directed=directed, dedupe=dedupe)


def to_networkx(g: graphs.CSRGraph):
    """The NetworkX graph with the same labelled vertices and edges (weights as 'weight')."""
    import networkx as nx

    g = g.to("cpu")
    src, dst, w = g.edges()
    ids = g.ids
    G = nx.DiGraph() if g.directed else nx.Graph()
    G.add_nodes_from(ids.tolist())
    if w is None:
        G.add_edges_from(zip(ids[src].tolist(), ids[dst].tolist(), strict=True))
    else:
        G.add_weighted_edges_from(
            zip(ids[src].tolist(), ids[dst].tolist(), w.astype(float).tolist(), strict=True)
        )
    return G


def by_label(g: graphs.CSRGraph, values) -> dict:
    return dict(zip(g.ids.tolist(), to_host(values).tolist(), strict=True))


def as_vector(g: graphs.CSRGraph, mapping: dict) -> np.ndarray:
    return np.array([mapping[k] for k in g.ids.tolist()], dtype=np.float64)


class TextStream(io.StringIO):
    """A text stream that says whether it is a terminal (progress lines draw differently there)."""

    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty
