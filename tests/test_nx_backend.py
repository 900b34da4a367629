"""graphjobs as a NetworkX backend: NetworkX's answers within its tolerances, its errors, the cache, and
NetworkX's own test modules run with graphjobs as their backend."""

from __future__ import annotations

import gzip
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

nx = pytest.importorskip("networkx")

from graphjobs import nx_backend  # noqa: E402
from graphs import _device  # noqa: E402
from graphs.errors import DeviceError, MissingDependencyError  # noqa: E402
from tests.conftest import dataset_path, snap, to_networkx  # noqa: E402


@pytest.fixture(autouse=True)
def registered():
    if "graphjobs" not in nx.utils.backends.backends:
        pytest.fail(
            "graphjobs is not registered as a NetworkX backend: reinstall (`make setup` or "
            "`pip install -e .`) so that pyproject's entry points take effect"
        )
    with nx.config(warnings_to_ignore={"cache"}):  # NetworkX's note that a cached conversion is used
        yield


def close(x: dict, y: dict, atol: float) -> bool:
    return x.keys() == y.keys() and all(abs(x[v] - y[v]) <= atol for v in y)


def weighted(G, seed=0):
    rng = np.random.default_rng(seed)
    for u, v in G.edges():
        G[u][v]["weight"] = float(rng.uniform(0.1, 3.0))
    return G


def with_sinks(G):
    G.add_edges_from([(0, "sink"), (1, "sink"), (2, "other sink")])
    return G


GRAPHS = {
    "directed": lambda: nx.gnp_random_graph(300, 0.02, seed=1, directed=True),
    "undirected": lambda: nx.gnp_random_graph(300, 0.02, seed=2),
    "weighted": lambda: weighted(nx.gnp_random_graph(300, 0.02, seed=3, directed=True)),
    "weighted undirected": lambda: weighted(nx.gnp_random_graph(300, 0.02, seed=4)),
    "dangling": lambda: with_sinks(nx.gnp_random_graph(300, 0.01, seed=5, directed=True)),
    "self-loops": lambda: nx.Graph([(0, 0), (0, 1), (1, 2), (2, 2), (2, 3)]),
    "multigraph": lambda: nx.MultiDiGraph([(0, 1), (0, 1), (1, 2), (2, 0), (2, 1)]),
    "labels": lambda: nx.relabel_nodes(nx.karate_club_graph(), lambda v: f"member {v}"),
}


@pytest.mark.parametrize("make", GRAPHS.values(), ids=GRAPHS.keys())
def test_pagerank_is_networkx_pagerank(make):
    G = make()
    assert close(nx.pagerank(G, backend="graphjobs"), nx.pagerank(G), 1e-6)


@pytest.mark.parametrize("make", GRAPHS.values(), ids=GRAPHS.keys())
def test_pagerank_options_are_networkx_options(make):
    G = make()
    nodes = list(G)
    personalization = {nodes[0]: 2.0, nodes[2]: 1.0, "not a node": 5.0}  # missing nodes: 0, extra ignored
    dangling = {nodes[1]: 1.0, nodes[-1]: 3.0}
    nstart = {v: i + 1.0 for i, v in enumerate(nodes)}
    kwargs = dict(alpha=0.7, personalization=personalization, dangling=dangling, nstart=nstart, tol=1e-9)
    assert close(nx.pagerank(G, backend="graphjobs", **kwargs), nx.pagerank(G, **kwargs), 1e-9)
    assert close(nx.pagerank(G, weight=None, backend="graphjobs"), nx.pagerank(G, weight=None), 1e-6)


def test_pagerank_on_wiki_vote():
    path = dataset_path("wiki-Vote.txt.gz")
    if path is None:
        pytest.skip("wiki-Vote.txt.gz (SNAP) is not in the datasets folder")
    with gzip.open(path, "rt") as f:
        G = nx.read_edgelist(f, comments="#", create_using=nx.DiGraph, nodetype=int)
    x, y = nx.pagerank(G, backend="graphjobs"), nx.pagerank(G)
    assert close(x, y, 1e-6)
    assert sum(abs(x[v] - y[v]) for v in G) < len(G) * 1e-6


def test_pagerank_raises_networkx_errors():
    G = nx.gnp_random_graph(50, 0.1, seed=6, directed=True)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.pagerank(G, max_iter=1, backend="graphjobs")
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.pagerank(G, max_iter=0, backend="graphjobs")
    with pytest.raises(ZeroDivisionError):
        nx.pagerank(G, personalization={0: 0.0}, backend="graphjobs")
    assert nx.pagerank(nx.DiGraph(), backend="graphjobs") == {}


def test_pagerank_leaves_what_graphjobs_refuses_to_networkx():
    G = nx.DiGraph([(0, 1), (1, 2), (2, 0)])
    assert isinstance(nx_backend.can_run("pagerank", (G,), {"personalization": {0: -1.0, 1: 2.0}}), str)
    assert isinstance(nx_backend.can_run("pagerank", (G,), {"alpha": 1.5}), str)
    assert nx_backend.can_run("pagerank", (G,), {"personalization": {0: 1.0}}) is True
    G[0][1]["weight"] = -1.0  # NetworkX takes it; graphjobs does not hold it
    with pytest.raises(NotImplementedError, match="graphjobs cannot hold this graph"):
        nx_backend.convert_from_nx(G, edge_attrs={"weight": 1})


def test_small_graphs_stay_on_networkx_unless_graphjobs_is_asked_for(monkeypatch):
    calls = count_conversions(monkeypatch)
    G = nx.gnp_random_graph(100, 0.05, seed=7, directed=True)
    assert isinstance(nx_backend.should_run("pagerank", (G,), {}), str)
    with nx.config(backend_priority=["graphjobs"]):
        nx.pagerank(G)
    assert calls == []  # NetworkX ran it
    nx.pagerank(G, backend="graphjobs")
    assert len(calls) == 1
    with nx.config.backends.graphjobs(min_edges=10):
        assert nx_backend.should_run("pagerank", (G,), {}) is True


def count_conversions(monkeypatch) -> list:
    """Records each conversion NetworkX asks the backend for."""
    calls = []
    convert = nx_backend.backend.convert_from_nx

    def counted(G, *args, **kwargs):
        calls.append(G)
        return convert(G, *args, **kwargs)

    monkeypatch.setattr(nx_backend.backend, "convert_from_nx", counted)
    return calls


def test_a_graph_is_converted_once_until_it_changes(monkeypatch):
    calls = count_conversions(monkeypatch)
    G = nx.gnp_random_graph(100, 0.05, seed=8, directed=True)
    with nx.config(cache_converted_graphs=True):
        first = nx.pagerank(G, backend="graphjobs")
        assert nx.pagerank(G, backend="graphjobs") == first
        assert len(calls) == 1
        # the graph converted with weights serves weight=None too (NetworkX's cache finds it)
        assert close(nx.pagerank(G, weight=None, backend="graphjobs"), nx.pagerank(G, weight=None), 1e-6)
        assert len(calls) == 1
        G.add_edge(0, 99)  # NetworkX's mutating methods clear the cache
        assert close(nx.pagerank(G, backend="graphjobs"), nx.pagerank(G), 1e-6)
        assert len(calls) == 2


def paper_graph():
    """The first graph of Jeh and Widom's SimRank paper: few vertices with two in-neighbours."""
    return nx.DiGraph(
        [
            ("Univ", "ProfA"),
            ("Univ", "ProfB"),
            ("ProfA", "StudentA"),
            ("ProfB", "StudentB"),
            ("StudentA", "Univ"),
            ("StudentB", "ProfB"),
        ]
    )


SIMRANK = dict(importance_factor=0.3, tolerance=1e-2)  # where graphjobs' guarantee reaches NetworkX's


@pytest.mark.parametrize(
    "make", [paper_graph, lambda: nx.DiGraph([(0, 1), (0, 2), (1, 3), (2, 4)])], ids=["paper", "tree"]
)
def test_simrank_similarity_is_networkx_within_its_tolerance(make):
    G = make()
    source, target = list(G)[1], list(G)[3]
    assert nx_backend.can_run("simrank_similarity", (G,), SIMRANK) is True
    x = nx.simrank_similarity(G, source=source, backend="graphjobs", **SIMRANK)
    assert close(x, nx.simrank_similarity(G, source=source, **SIMRANK), SIMRANK["tolerance"])
    xy = nx.simrank_similarity(G, source=source, target=target, backend="graphjobs", **SIMRANK)
    assert isinstance(xy, float)
    assert abs(xy - nx.simrank_similarity(G, source=source, target=target, **SIMRANK)) <= 1e-2
    every = nx.simrank_similarity(G, backend="graphjobs", **SIMRANK)
    expected = nx.simrank_similarity(G, **SIMRANK)
    assert every.keys() == expected.keys()
    assert all(close(every[u], expected[u], SIMRANK["tolerance"]) for u in G)
    with pytest.raises(nx.NodeNotFound, match="Source node 10 not in G"):
        nx.simrank_similarity(G, source=10, backend="graphjobs", **SIMRANK)


def test_simrank_similarity_leaves_what_its_guarantee_cannot_reach_to_networkx():
    G = paper_graph()
    for kwargs in (
        {},  # NetworkX's defaults: its iterate may lie 9 * tolerance from SimRank
        dict(importance_factor=0.3, tolerance=1e-4),  # too many walks
        dict(SIMRANK, max_iterations=3),  # NetworkX may raise ExceededMaxIterations
    ):
        assert isinstance(nx_backend.can_run("simrank_similarity", (G,), kwargs), str)
        with pytest.raises(NotImplementedError):
            nx.simrank_similarity(G, backend="graphjobs", **kwargs)
    multi = nx.MultiDiGraph(paper_graph())
    assert isinstance(nx_backend.can_run("simrank_similarity", (multi,), SIMRANK), str)
    assert isinstance(nx_backend.can_run("simrank_similarity", (weighted(paper_graph()),), SIMRANK), str)
    with nx.config(fallback_to_nx=True, backend_priority=["graphjobs"]):  # refused: NetworkX answers
        assert nx.simrank_similarity(G, source="Univ") == nx.simrank_similarity(
            G, source="Univ", backend="networkx"
        )


def test_config_takes_the_devices_and_edge_counts_only():
    config = nx.config.backends.graphjobs
    assert (config.device, config.gpu_min_edges, config.min_edges) == ("auto", 1_000_000, 50_000)
    for device in ("cpu", "gpu", "auto"):
        with config(device=device):
            assert config.device == device
    assert config.device == "auto"
    with pytest.raises(ValueError, match=r"graphjobs.device must be one of 'auto', 'cpu', 'gpu', got 'cuda'"):
        config.device = "cuda"
    for bad in (-1, 2.5, "many", True):
        with pytest.raises(ValueError, match=r"graphjobs.gpu_min_edges must be an integer >= 0"):
            config.gpu_min_edges = bad
    with pytest.raises(ValueError, match=r"graphjobs.min_edges must be an integer >= 0"):
        config(min_edges=-5)
    assert (config.device, config.gpu_min_edges, config.min_edges) == ("auto", 1_000_000, 50_000)


def backend_graph(G):
    return nx_backend.convert_from_nx(G)


def test_auto_takes_the_gpu_for_large_graphs_where_there_is_one(monkeypatch):
    G = backend_graph(nx.gnp_random_graph(100, 0.05, seed=9, directed=True))
    monkeypatch.setattr(_device, "gpu_available", lambda: False)
    with nx.config.backends.graphjobs(gpu_min_edges=0):
        assert nx_backend.compute_device(G) == "cpu"
    monkeypatch.setattr(_device, "gpu_available", lambda: True)  # decides only: nothing runs on it here
    assert nx_backend.compute_device(G) == "cpu"  # under gpu_min_edges
    with nx.config.backends.graphjobs(gpu_min_edges=G.csr.m):
        assert nx_backend.compute_device(G) == "gpu"
        with nx.config.backends.graphjobs(device="cpu"):
            assert nx_backend.compute_device(G) == "cpu"


def test_auto_runs_on_the_cpu_without_a_gpu(monkeypatch):
    monkeypatch.setattr(_device, "gpu_available", lambda: False)
    devices = record_devices(monkeypatch)
    G = nx.gnp_random_graph(200, 0.03, seed=10, directed=True)
    with nx.config.backends.graphjobs(device="auto", gpu_min_edges=0):
        assert close(nx.pagerank(G, backend="graphjobs"), nx.pagerank(G), 1e-6)
    assert devices == ["cpu"]


def test_gpu_without_a_gpu_is_an_error_naming_what_is_missing(monkeypatch):
    monkeypatch.setattr(_device, "gpu_available", lambda: False)
    G = nx.gnp_random_graph(50, 0.1, seed=11, directed=True)
    with nx.config.backends.graphjobs(device="gpu"):
        # no CuPy: MissingDependencyError with the install hint; CuPy but no device: DeviceError
        with pytest.raises(
            (MissingDependencyError, DeviceError), match=r"graphjobs.device is 'gpu', but"
        ) as got:
            nx.pagerank(G, backend="graphjobs")
        assert "CuPy" in str(got.value)
        with pytest.raises((MissingDependencyError, DeviceError), match=r"graphjobs.device is 'gpu'"):
            nx.simrank_similarity(paper_graph(), source="Univ", backend="graphjobs", **SIMRANK)


def record_devices(monkeypatch) -> list:
    """Records the device of the graph each backend PageRank call runs on."""
    devices = []
    run = nx_backend._pagerank

    def recorded(G, **kwargs):
        devices.append(G.device)
        return run(G, **kwargs)

    monkeypatch.setattr(nx_backend, "_pagerank", recorded)
    return devices


def epinions():
    return to_networkx(snap("soc-Epinions1"))


@pytest.mark.gpu
def test_pagerank_on_the_gpu_is_networkx_pagerank(monkeypatch):
    G = epinions()
    calls, devices = count_conversions(monkeypatch), record_devices(monkeypatch)
    expected = nx.pagerank(G)
    with nx.config(cache_converted_graphs=True), nx.config.backends.graphjobs(device="gpu"):
        x = nx.pagerank(G, backend="graphjobs")
        assert close(x, expected, 1e-6)
        assert sum(abs(x[v] - expected[v]) for v in G) < len(G) * 1e-6  # NetworkX's tol: per node
        assert all(type(r) is float for r in x.values())
        assert close(nx.pagerank(G, backend="graphjobs"), x, 1e-12)  # the cached graph and its GPU copy
        assert len(calls) == 1
    with nx.config.backends.graphjobs(device="auto", gpu_min_edges=0):
        assert close(nx.pagerank(G, backend="graphjobs"), expected, 1e-6)
    assert devices == ["gpu"] * 3


@pytest.mark.gpu
def test_pagerank_options_on_the_gpu_are_networkx_options(monkeypatch):
    G = epinions()
    devices = record_devices(monkeypatch)
    nodes = list(G)
    personalization = {nodes[0]: 2.0, nodes[10]: 1.0, nodes[1000]: 0.5, "not a node": 5.0}
    dangling = {nodes[1]: 1.0, nodes[-1]: 3.0}
    for kwargs, tol in (
        (dict(personalization=personalization), 1e-6),
        (dict(alpha=0.7, personalization=personalization, dangling=dangling, tol=1e-9), 1e-9),
        (dict(personalization=personalization, weight=None), 1e-6),
    ):
        expected = nx.pagerank(G, **kwargs)
        with nx.config.backends.graphjobs(device="gpu"):
            x = nx.pagerank(G, backend="graphjobs", **kwargs)
        assert close(x, expected, tol)
        assert sum(abs(x[v] - expected[v]) for v in G) < len(G) * tol
    weights = weighted(nx.gnp_random_graph(2000, 0.005, seed=12, directed=True))
    with nx.config.backends.graphjobs(device="gpu"):
        x = nx.pagerank(weights, backend="graphjobs", personalization={0: 1.0, 5: 3.0})
        with pytest.raises(nx.PowerIterationFailedConvergence):
            nx.pagerank(weights, max_iter=1, backend="graphjobs")
    assert close(x, nx.pagerank(weights, personalization={0: 1.0, 5: 3.0}), 1e-6)
    assert set(devices) == {"gpu"}


@pytest.mark.gpu
def test_simrank_similarity_on_the_gpu_is_networkx_within_its_tolerance():
    G = paper_graph()
    with nx.config.backends.graphjobs(device="gpu"):
        x = nx.simrank_similarity(G, source="ProfA", backend="graphjobs", **SIMRANK)
        every = nx.simrank_similarity(G, backend="graphjobs", **SIMRANK)
    assert close(x, nx.simrank_similarity(G, source="ProfA", **SIMRANK), SIMRANK["tolerance"])
    assert all(type(s) is float for s in x.values())
    expected = nx.simrank_similarity(G, **SIMRANK)
    assert all(close(every[u], expected[u], SIMRANK["tolerance"]) for u in G)


NX_TESTS = [
    "networkx.algorithms.link_analysis.tests.test_pagerank",
    "networkx.algorithms.tests.test_similarity",
]


def test_networkx_own_tests_pass_with_graphjobs_as_their_backend(tmp_path):
    if any(importlib.util.find_spec(m) is None for m in NX_TESTS):
        pytest.skip("NetworkX's test modules are not installed")
    root = str(Path(__file__).resolve().parents[1])  # this checkout's graphjobs, wherever pytest runs
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, NETWORKX_TEST_BACKEND="graphjobs", NETWORKX_FALLBACK_TO_NX="True", PYTHONPATH=path)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", *NX_TESTS],
        cwd=tmp_path,  # outside the repository: NetworkX's conftest.py, not ours
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]
    print(done.stdout.splitlines()[-1], f"({time.perf_counter() - t0:.1f} s)")
