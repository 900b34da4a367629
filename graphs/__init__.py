"""Graphs for graphjobs: the immutable CSRGraph, readers, generators, save/load."""

from . import toy
from ._device import gpu_available
from .csr import CSRGraph
from .edges import from_edges
from .errors import (
    DeviceError,
    GraphFormatError,
    IntegrityError,
    LabelError,
    LockedError,
    MemoryLimitError,
    MissingDependencyError,
    OptionError,
    UserError,
)
from .generators import barabasi_albert, erdos_renyi, rmat
from .interop import (
    as_graph,
    from_cudf,
    from_cugraph,
    from_dask_cudf,
    from_networkx,
    from_pandas,
    from_scipy,
    to_cugraph,
    to_networkx,
    to_pylibcugraph,
    vertex_dict,
    vertex_frame,
)
from .partition import GraphPart, PartitionedGraph, load_part, load_partitioned, partition
from .read import read_edgelist
from .reorder import reorder, reorder_orders
from .store import load

__all__ = [
    "CSRGraph",
    "DeviceError",
    "GraphFormatError",
    "GraphPart",
    "IntegrityError",
    "LabelError",
    "LockedError",
    "MemoryLimitError",
    "MissingDependencyError",
    "OptionError",
    "PartitionedGraph",
    "UserError",
    "as_graph",
    "barabasi_albert",
    "erdos_renyi",
    "from_cudf",
    "from_cugraph",
    "from_dask_cudf",
    "from_edges",
    "from_networkx",
    "from_pandas",
    "from_scipy",
    "gpu_available",
    "load",
    "load_part",
    "load_partitioned",
    "partition",
    "read_edgelist",
    "reorder",
    "reorder_orders",
    "rmat",
    "to_cugraph",
    "to_networkx",
    "to_pylibcugraph",
    "toy",
    "vertex_dict",
    "vertex_frame",
]
