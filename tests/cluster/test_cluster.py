"""cluster: LocalCluster/LocalCUDACluster selection, the worker plugin, joining a running scheduler."""

from __future__ import annotations

import os
import time

import dask
import pytest
from distributed import Client, LocalCluster, default_client

from cluster import GraphjobsWorker, connect, make_cluster, worker_device


def _worker_state():
    import numba

    return worker_device(), numba.get_num_threads()


def _task_threads():  # a task that runs Numba without asking for its device first
    import numba

    return numba.get_num_threads()


def test_cpu_cluster_with_plugin_and_connect():
    cap = max(1, (os.cpu_count() or 1) // 2)
    with make_cluster(2, device="cpu", dashboard_address=":0") as cluster:
        assert isinstance(cluster, LocalCluster) and len(cluster.workers) == 2
        with Client(cluster) as client:
            assert set(client.run(_worker_state).values()) == {("cpu", cap)}
            # Numba's count is per thread: the task threads too, not only the plugin's
            tasks = [client.submit(_task_threads, pure=False, workers=[w]) for w in client.run(os.getpid)]
            assert client.gather(tasks) == [cap, cap]
        with connect(cluster.scheduler_address) as client:  # an existing scheduler
            assert client.submit(worker_device).result() == "cpu"


def test_plugin_caps_the_task_threads_that_ask_for_their_device():
    """On a cluster graphjobs did not start, the plugin's cap reaches a task thread through
    ``worker_device``, which graphjobs' tasks call."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            client.register_plugin(GraphjobsWorker("cpu", numba_threads=1))
            assert client.submit(_worker_state, pure=False).result() == ("cpu", 1)


def test_bad_arguments():
    before = dask.config.get("scheduler", None)  # failed connections below must leave it so
    with pytest.raises(ValueError, match="device"):
        make_cluster(device="tpu")
    with pytest.raises(ValueError, match="apply only without"):
        connect("tcp://127.0.0.1:1", n_workers=2)
    with pytest.raises(ValueError, match=r"scheduler address '127.0.0.1:8786x': .*expected HOST:PORT"):
        connect("127.0.0.1:8786x")
    with pytest.raises(ValueError, match=r"scheduler address 'nohost': missing port number"):
        connect("nohost")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):  # nothing listens on port 1
        with pytest.raises(
            OSError, match=r"no Dask scheduler answered at 'tcp://127.0.0.1:1' .*graphjobs cluster"
        ):
            connect("tcp://127.0.0.1:1")
    # the timeout keyword overrides dask's (30 s here): the error names it, well before 30 s
    t0 = time.perf_counter()
    with pytest.raises(OSError, match=r"no Dask scheduler answered .*after 1 s"):
        connect("tcp://127.0.0.1:1", timeout=1)
    assert time.perf_counter() - t0 < 20
    for bad in (0, -1, True, "5s"):
        with pytest.raises(ValueError, match=r"timeout must be a number of seconds > 0"):
            connect("tcp://127.0.0.1:1", timeout=bad)
    with pytest.raises(ValueError, match="timeout applies only with a scheduler address"):
        connect(timeout=5, n_workers=1)
    # the failed connections left dask's default scheduler as it was, and no client behind (a malformed
    # address used to leave one registered, on which the compute below waited forever): local work runs
    assert dask.config.get("scheduler", None) == before
    with pytest.raises(ValueError, match="No clients found"):
        default_client()
    assert dask.delayed(sum)([1, 2]).compute() == 3
    # a cluster of no workers would take jobs and never run them
    with pytest.raises(
        ValueError, match=r"n_workers must be an integer >= 1 \(or None for the default\), got -1"
    ):
        make_cluster(-1)
    with pytest.raises(ValueError, match="threads_per_worker must be an integer >= 1"):
        make_cluster(1, threads_per_worker=0)
    # refused before any process starts, not as "Nanny failed to start" with the cause in a worker's log
    with pytest.raises(
        TypeError, match=r"unknown option 'memlimit' .*LocalCluster.*did you mean 'memory_limit'"
    ):
        make_cluster(1, device="cpu", memlimit="1GB")


def test_gpu_cluster_refused_without_gpu(monkeypatch):
    import cluster.local as local

    monkeypatch.setattr(local, "_cuda_cluster_available", lambda: False)
    with pytest.raises(RuntimeError, match="dask-cuda"):
        make_cluster(device="gpu")


@pytest.mark.gpu
def test_cuda_cluster_one_worker_per_gpu():
    from graphs._device import gpu_count

    with make_cluster(dashboard_address=":0") as cluster, Client(cluster) as client:
        assert type(cluster).__name__ == "LocalCUDACluster" and len(cluster.workers) == gpu_count()
        assert {s[0] for s in client.run(_worker_state).values()} == {"gpu"}
    with pytest.raises(TypeError, match=r"'rmm_pool' .*LocalCUDACluster.*did you mean 'rmm_pool_size'"):
        make_cluster(rmm_pool="1GB")


def test_connect_closes_the_new_cluster_when_its_client_fails(monkeypatch):
    import distributed

    import cluster.local as local

    made = []

    def tracked(*args, **kw):
        made.append(make_cluster(*args, **kw))
        return made[-1]

    def refuse(*args, **kw):
        raise OSError("refused")

    monkeypatch.setattr(local, "make_cluster", tracked)
    monkeypatch.setattr(distributed, "Client", refuse)
    with pytest.raises(OSError, match="refused"):
        connect(n_workers=1, device="cpu", dashboard_address=":0")
    assert len(made) == 1 and made[0].status.name == "closed"
