"""Collectives between Dask workers: an NCCL clique among dask-cuda workers, set up through Dask.

``run_spmd(client, fn, args)`` runs ``fn(comm, *args[r])`` as one task on each of ``len(args)`` workers
at once, where ``comm`` is an ``NcclComm`` of rank ``r``: the clique's unique id is made on the first
worker and handed to the others through the scheduler (as cuGraph's comms do), so vectors then move
GPU to GPU over NVLink or PCIe and never through Dask.
"""

from __future__ import annotations

import uuid

import numpy as np


class NcclComm:
    """Rank ``rank`` of ``size`` in an NCCL communicator: in-place collectives on the current stream."""

    def __init__(self, uid, rank: int, size: int):
        from cupy.cuda import nccl

        self._nccl = nccl
        self.rank, self.size = rank, size
        self._comm = nccl.NcclCommunicator(size, uid, rank)

    def _dtype(self, a):
        nccl = self._nccl
        types = {
            np.float32: nccl.NCCL_FLOAT32,
            np.float64: nccl.NCCL_FLOAT64,
            np.int64: nccl.NCCL_INT64,
            np.int32: nccl.NCCL_INT32,
        }
        try:
            return types[a.dtype.type]
        except KeyError:
            raise TypeError(f"no NCCL type for {a.dtype}") from None

    @staticmethod
    def _stream() -> int:
        import cupy as cp

        return cp.cuda.get_current_stream().ptr

    def allreduce(self, a) -> None:
        """Sum the contiguous CuPy array ``a`` over the ranks, in place."""
        self._comm.allReduce(
            a.data.ptr, a.data.ptr, a.size, self._dtype(a), self._nccl.NCCL_SUM, self._stream()
        )

    def allgather(self, a, bounds, *, padded: bool = False) -> None:
        """Rank ``r`` owns ``a[bounds[r]:bounds[r+1]]``; afterwards every rank holds all of ``a``.

        Grouped broadcasts, one per rank (an all-gather of unequal ranges, in place), or with ``padded``
        one ``ncclAllGather`` of equal slots through a scratch buffer (two extra device copies).
        """
        if padded:
            return self._allgather_padded(a, bounds)
        dtype, stream, size = self._dtype(a), self._stream(), a.dtype.itemsize
        self._nccl.groupStart()
        for r in range(self.size):
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            if hi > lo:
                ptr = a.data.ptr + lo * size
                self._comm.broadcast(ptr, ptr, hi - lo, dtype, r, stream)
        self._nccl.groupEnd()

    def _allgather_padded(self, a, bounds) -> None:
        import cupy as cp

        sizes = [int(bounds[r + 1]) - int(bounds[r]) for r in range(self.size)]
        slot = max(sizes)
        key = (slot, a.dtype.str)
        if getattr(self, "_scratch_key", None) != key:
            self._scratch, self._scratch_key = cp.empty(self.size * slot, dtype=a.dtype), key
        buf, me = self._scratch, self.rank
        lo = int(bounds[me])
        buf[me * slot : me * slot + sizes[me]] = a[lo : lo + sizes[me]]
        mine = buf.data.ptr + me * slot * a.dtype.itemsize
        self._comm.allGather(mine, buf.data.ptr, slot, self._dtype(a), self._stream())
        for r in range(self.size):
            if r != me and sizes[r]:
                a[int(bounds[r]) : int(bounds[r + 1])] = buf[r * slot : r * slot + sizes[r]]

    def halo_plan(self, needed, bounds) -> dict:
        """Set up ``halo``: ``needed`` (sorted unique global ids, CuPy int64) are the entries this rank
        reads; rank ``r`` owns ``bounds[r]:bounds[r+1]``. Ranks swap their lists once, here."""
        import cupy as cp

        me, size = self.rank, self.size
        recv_idx, counts = {}, cp.zeros((size, size), dtype=cp.int64)
        for r in range(size):
            if r != me:
                lo, hi = int(bounds[r]), int(bounds[r + 1])
                recv_idx[r] = needed[(needed >= lo) & (needed < hi)]
                counts[me, r] = recv_idx[r].size
        self.allreduce(counts)  # counts[q, r]: entries q reads from r
        counts = counts.get()
        send_idx = {q: cp.empty(int(counts[q, me]), dtype=cp.int64) for q in range(size) if q != me}
        self._pairs(
            [(q, send_idx[q], "recv") for q in send_idx] + [(r, recv_idx[r], "send") for r in recv_idx]
        )
        cp.cuda.get_current_stream().synchronize()
        return {"send": send_idx, "recv": recv_idx, "sendbuf": {}, "recvbuf": {}}

    def _pairs(self, ops: list) -> None:
        """Grouped point-to-point transfers, ``(peer, array, 'send' | 'recv')`` each."""
        stream = self._stream()
        self._nccl.groupStart()
        for peer, arr, kind in ops:
            if arr.size:
                call = self._comm.send if kind == "send" else self._comm.recv
                call(arr.data.ptr, arr.size, self._dtype(arr), peer, stream)
        self._nccl.groupEnd()

    def halo(self, a, plan) -> None:
        """Bring the entries of ``a`` this rank reads from the other ranks (``halo_plan``), in place."""
        import cupy as cp

        for q, idx in plan["send"].items():
            buf = plan["sendbuf"].get(q)
            if buf is None or buf.dtype != a.dtype:
                buf = plan["sendbuf"][q] = cp.empty(idx.size, dtype=a.dtype)
            cp.take(a, idx, out=buf)
        for r, idx in plan["recv"].items():
            if plan["recvbuf"].get(r) is None or plan["recvbuf"][r].dtype != a.dtype:
                plan["recvbuf"][r] = cp.empty(idx.size, dtype=a.dtype)
        sends = [(q, buf, "send") for q, buf in plan["sendbuf"].items()]
        self._pairs(sends + [(r, buf, "recv") for r, buf in plan["recvbuf"].items()])
        for r, idx in plan["recv"].items():
            a[idx] = plan["recvbuf"][r]

    def barrier(self) -> None:
        import cupy as cp

        one = cp.ones(1, dtype=cp.float64)
        self.allreduce(one)
        cp.cuda.get_current_stream().synchronize()

    def close(self) -> None:
        self._comm.destroy()


def _unique_id():
    from cupy.cuda import nccl

    return nccl.get_unique_id()


_CLIQUES: dict = {}  # worker side: communicators kept between calls of one clique


def _rank_task(fn, uid, rank: int, size: int, clique, *args):
    if clique is None:
        comm = NcclComm(uid, rank, size)
        try:
            return fn(comm, *args)
        finally:
            comm.close()
    comm = _CLIQUES.get(clique)
    if comm is None:
        comm = _CLIQUES[clique] = NcclComm(uid, rank, size)
    return fn(comm, *args)


def _close_clique(clique) -> None:
    comm = _CLIQUES.pop(clique, None)
    if comm is not None:
        comm.close()


def close_clique(client, clique: str) -> None:
    """Destroy the communicators that ``run_spmd(..., clique=clique)`` kept on the workers."""
    client.run(_close_clique, clique)
    _UIDS.pop((client.id, clique), None)


_UIDS: dict = {}  # client side: the unique id of each clique


def spmd_workers(client, count: int) -> list[str]:
    """``count`` worker addresses (sorted, so ranks map to workers the same way each time)."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if len(workers) < count:
        raise ValueError(f"{count} ranks need {count} workers; the cluster has {len(workers)}")
    return workers[:count]


def run_spmd(
    client,
    fn,
    args: list[tuple],
    *,
    workers: list[str] | None = None,
    name: str = "spmd",
    clique: str | None = None,
):
    """Run ``fn(comm, *args[r])`` on worker ``r`` for every ``r`` at once, with an NCCL communicator.

    Parameters
    ----------
    client : distributed.Client
        Of a cluster whose workers each own one GPU (``dask_cuda.LocalCUDACluster`` or ``dask cuda worker``).
    fn : callable
        Run once per rank; must perform the same sequence of collectives on every rank.
    args : list of tuple
        Per-rank arguments (Dask futures are resolved on the worker, so large state stays there).
    workers : list of str, optional
        Worker addresses, one per rank (default: the first ``len(args)`` by address).
    name : str
        Key prefix of the tasks, as shown on the dashboard.
    clique : str, optional
        Keep the communicators on the workers under this name for later calls with the same workers
        (creating one costs a fraction of a second); ``close_clique`` destroys them.

    Returns
    -------
    list
        ``fn``'s results in rank order.
    """
    size = len(args)
    workers = workers or spmd_workers(client, size)
    if len(set(workers)) != size:
        raise ValueError(f"run_spmd needs {size} distinct workers, got {workers}")
    uid = _UIDS.get((client.id, clique)) if clique else None
    if uid is None:
        uid = client.submit(_unique_id, workers=[workers[0]], pure=False).result()
        if clique:
            _UIDS[(client.id, clique)] = uid
    tag = uuid.uuid4().hex[:8]
    futures = [
        client.submit(
            _rank_task,
            fn,
            uid,
            r,
            size,
            clique,
            *args[r],
            workers=[w],
            allow_other_workers=False,
            pure=False,
            key=f"graphjobs-{name}-{tag}-{r}",
        )
        for r, w in enumerate(workers)
    ]
    return client.gather(futures)
