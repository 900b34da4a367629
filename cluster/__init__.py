"""Cluster: a thin layer over Dask (LocalCUDACluster or LocalCluster) plus small worker plugins."""

from .local import connect, make_cluster
from .worker import GraphjobsWorker, set_worker_device, worker_device

__all__ = ["GraphjobsWorker", "connect", "make_cluster", "set_worker_device", "worker_device"]
