"""Work spread over the workers of a Dask cluster: the only code that holds a ``distributed.Client``.

- ``pagerank(PG, client, ...)``: PageRank of a partitioned graph, a part per worker (NCCL between GPUs).
- ``influence_maximization(G, k, client, ...)``: IMM with its RR samples sharded over the workers.
"""

from pipelines.distributed.influence import influence_maximization
from pipelines.distributed.pagerank import pagerank

__all__ = ["influence_maximization", "pagerank"]
