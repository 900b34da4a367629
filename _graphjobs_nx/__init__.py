"""What NetworkX learns about the graphjobs backend when it starts, without importing graphjobs.

NetworkX calls ``get_info`` (the ``networkx.backend_info`` entry point) at the end of ``import networkx``,
so this package imports nothing but NetworkX's ``Config`` (``_graphjobs_nx.config``, the backend's
settings): the backend itself (``graphjobs.nx_backend``, which compiles Numba
functions) loads only when a call is dispatched to it.
"""

from __future__ import annotations

MIN_EDGES = 50_000  # below this, NetworkX's own code is as fast: stay there unless asked
DEVICES = ("auto", "cpu", "gpu")  # values of nx.config.backends.graphjobs.device
GPU_MIN_EDGES = 1_000_000  # from this, device='auto' takes the GPU (when there is one)

_PAGERANK = (
    "Runs ``graphjobs.pagerank`` (float64 power iteration, NetworkX's stopping rule L1 change < N * tol) "
    "on the CPU or the GPU, as ``nx.config.backends.graphjobs.device`` says. Falls back to NetworkX "
    "(``can_run`` is False) for negative or non-finite personalization, nstart or dangling values, nstart "
    "or dangling summing to 0, alpha outside [0, 1] or tol <= 0; graphs with negative or non-numeric "
    "weights are not converted."
)
_SIMRANK = (
    "Runs ``graphjobs.simrank`` (sampled, additive error epsilon with high probability) only where its "
    "guarantee puts it within ``tolerance`` of NetworkX's iterate: importance_factor below about 0.45 "
    "and a bounded number of walks (about tolerance >= 5e-3). NetworkX's defaults (0.9, 1e-4) always "
    "run in NetworkX, as do weighted graphs and multigraphs. On the CPU or the GPU (the same guarantee), "
    "as ``nx.config.backends.graphjobs.device`` says."
)


def get_info() -> dict:
    """The ``networkx.backend_info`` of graphjobs: the functions it implements, their limits and the
    backend's settings (``_graphjobs_nx.config.GraphjobsConfig``)."""
    try:  # NetworkX calls this at the end of its own import
        from _graphjobs_nx.config import GraphjobsConfig

        config = GraphjobsConfig()
    except ImportError:  # a NetworkX without configs (before 3.3): the settings unchecked
        config = {"min_edges": MIN_EDGES, "device": "auto", "gpu_min_edges": GPU_MIN_EDGES}
    return {
        "backend_name": "graphjobs",
        "project": "graphjobs",
        "package": "graphjobs",
        "short_summary": "PageRank and SimRank on graphjobs' CPU (Numba) and GPU (CuPy) operators.",
        "default_config": config,
        "functions": {
            "pagerank": {"additional_docs": _PAGERANK},
            "simrank_similarity": {"additional_docs": _SIMRANK},
        },
    }
