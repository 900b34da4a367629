"""``nx.config.backends.graphjobs``: the backend's settings, checked when they are set.

NetworkX builds its config from ``get_info()["default_config"]`` at the end of its own import, so this
module (which subclasses NetworkX's ``Config``) is imported from ``get_info`` then, never before
NetworkX.
"""

from __future__ import annotations

from numbers import Integral

from networkx.utils.configs import Config

from _graphjobs_nx import DEVICES, GPU_MIN_EDGES, MIN_EDGES


class GraphjobsConfig(Config):
    """Settings of the graphjobs NetworkX backend.

    min_edges : int
        With ``nx.config.backend_priority = ["graphjobs"]``, graphs of fewer edges stay in NetworkX
        (``backend="graphjobs"`` runs them in graphjobs all the same).
    device : {'auto', 'cpu', 'gpu'}
        Where graphjobs computes. 'auto': on the GPU when CuPy sees a CUDA device and the graph has at
        least ``gpu_min_edges`` edges, else on the CPU. 'gpu': on the GPU, an error naming what is
        missing (CuPy, or a CUDA device) where there is none. 'cpu': on the CPU.
    gpu_min_edges : int
        The edges from which 'auto' takes the GPU. Below it a call is dominated by fixed costs (the
        graph's first move to the GPU, kernel launches, the result's copy back to the host and its
        dict), which the CPU's parallel iteration does not pay.
    """

    min_edges: int = MIN_EDGES
    device: str = "auto"
    gpu_min_edges: int = GPU_MIN_EDGES

    def _on_setattr(self, key, value):
        if key == "device":
            if value not in DEVICES:
                raise ValueError(
                    f"nx.config.backends.graphjobs.device must be one of {', '.join(map(repr, DEVICES))}, "
                    f"got {value!r}"
                )
        elif key in ("min_edges", "gpu_min_edges"):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
                raise ValueError(
                    f"nx.config.backends.graphjobs.{key} must be an integer >= 0 (edges), got {value!r}"
                )
            value = int(value)
        return value
