"""PageRank of a partitioned graph over the workers of a Dask cluster: ``pagerank(PG, client, ...)``.

Each worker holds one part (``graphs.partition``) for the whole call.
- GPU workers: one task per worker runs the complete power iteration (``_pagerank_part.loop_gpu``, by
  pull or by the binned passes over a layout of the part's in-edges); after
  every iteration each rank is sent the entries of ``x / outweight`` its in-edges read (halo exchange),
  and the L1 change and dangling mass are all-reduced, through an NCCL clique (``cluster.comms``), so
  vectors never pass through Dask.
- CPU workers: each iteration is one task per part plus a task that joins the slices; Dask moves the
  vector between workers and only the iteration's L1 change travels to the client.
"""

from __future__ import annotations

import operator
import uuid
import weakref

import numpy as np

from cluster.comms import run_spmd, spmd_workers
from graphs.errors import DeviceError, OptionError
from graphs.partition import PartitionedGraph
from operators.errors import ConvergenceError
from operators.options import PageRankOptions
from operators.pagerank import check_dtype, check_weighted, start_vectors, warn_loose_tol
from operators.pagerank.parts import inverse_out, loop_gpu, step_cpu

# the futures of each partitioned graph's parts, per (client, workers), while the graph is alive here
_PLACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def pagerank(
    PG: PartitionedGraph,
    client,
    *,
    alpha: float = PageRankOptions.alpha,
    personalization=None,
    max_iter: int = PageRankOptions.max_iter,
    tol: float = PageRankOptions.tol,
    nstart=None,
    dangling=None,
    weighted: bool | None = None,
    method: str = PageRankOptions.method,
    dtype=np.float32,
    info: dict | None = None,
    options: PageRankOptions | None = None,
) -> np.ndarray:
    """PageRank of a partitioned graph, part ``r`` on the ``r``-th worker of ``client`` (by address).

    The semantics, options and stopping rule are ``operators.pagerank``'s (NetworkX's): the L1 change
    of an iteration below ``n * tol``. With GPU workers each worker runs the iteration on its range and
    receives through NCCL the entries of the vector its in-edges read; with CPU workers the vector is
    exchanged through Dask.

    Parameters
    ----------
    PG : graphs.PartitionedGraph
        ``graphs.partition(G, parts)`` or ``graphs.load_partitioned(path)``; needs as many workers as
        parts. The parts stay on the workers for later calls while ``PG`` is alive in this process.
    client : distributed.Client
    method : {'auto', 'pull', 'binned'}
        'auto': each GPU worker chooses as ``operators.pagerank`` does for its part; CPU workers pull.
    dtype : {float32, float64}
        Value type on GPU workers; CPU workers compute in float64.
    info : dict, optional
        Filled with ``device``, ``workers`` and, on GPUs, per-rank ``timings``.
    options : PageRankOptions, optional
        ``alpha``, ``max_iter``, ``tol`` and ``method`` in one checked object, as in ``operators.pagerank``.

    Returns
    -------
    numpy.ndarray
        Rank per internal vertex id; ``PG.ids`` holds the labels.

    Raises
    ------
    ConvergenceError
        If the tolerance is not reached within ``max_iter`` iterations.
    """
    if not isinstance(PG, PartitionedGraph):
        raise TypeError(
            f"expected a graphs.PartitionedGraph, got {type(PG).__name__}: see operators.pagerank"
        )
    o = PageRankOptions.resolve(options, alpha=alpha, max_iter=max_iter, tol=tol, method=method)
    if o.method == "push":
        raise OptionError("a partitioned graph is computed by 'pull' or 'binned' (or 'auto'), not 'push'")
    weighted = check_weighted(PG, weighted)
    dtype = check_dtype(dtype)
    n, tol = PG.n, o.tol
    by_label = any(isinstance(v, dict) for v in (personalization, dangling, nstart))
    labels = PG.label_graph() if by_label else PG
    p, dw, x0 = start_vectors(labels, personalization, dangling, nstart)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    warn_loose_tol(n, tol)
    x, iters, err = pagerank_partitioned(
        PG,
        client,
        alpha=o.alpha,
        x0=x0,
        p=p,
        dw=dw,
        weighted=weighted,
        max_iter=o.max_iter,
        threshold=n * tol,
        dtype=dtype,
        device="auto",
        info=info,
        method=o.method,
    )
    if not err < n * tol:
        raise ConvergenceError("pagerank", iters, err, n * tol)
    return x


def _worker_device():
    from cluster.worker import worker_device

    return worker_device()


def _place_parts(client, PG: PartitionedGraph, workers):
    """One future per part, on its worker: loaded there from ``PG.path`` when saved, else scattered.

    The futures are kept with ``PG`` (per client and worker list), so the parts stay on the workers for
    later calls while ``PG`` is alive in this process.
    """
    placed = _PLACED.setdefault(PG, {})
    key = (client.id, tuple(workers))
    futures = placed.get(key)
    if futures is None or any(f.status in ("error", "cancelled", "lost") for f in futures):
        futures = placed[key] = _place(client, PG, workers)
    return futures


def _place(client, PG, workers):
    import graphs

    if PG.path is not None:
        return [
            client.submit(
                graphs.load_part,
                PG.path,
                r,
                workers=[w],
                allow_other_workers=False,
                pure=True,
                key=f"graphjobs-part-{p.token}",
            )
            for r, (p, w) in enumerate(zip(PG.parts, workers, strict=True))
        ]
    return [client.scatter(p, workers=[w], hash=True) for p, w in zip(PG.parts, workers, strict=True)]


def pagerank_partitioned(
    PG: PartitionedGraph,
    client,
    *,
    alpha,
    x0,
    p,
    dw,
    weighted,
    max_iter,
    threshold,
    dtype,
    device,
    info,
    exchange="halo",
    method="auto",
):
    """Run partitioned PageRank; returns ``(x, iterations, last_error)`` with ``x`` a host vector.
    ``method``: 'pull', 'binned', or 'auto' (each GPU rank by ``pagerank``'s rule; CPU workers pull)."""
    workers = spmd_workers(client, len(PG))
    devices = client.run(_worker_device, workers=workers)
    if device == "auto":
        device = "gpu" if all(d == "gpu" for d in devices.values()) else "cpu"
    elif device == "gpu" and any(d != "gpu" for d in devices.values()):
        raise DeviceError(f"device='gpu', but these workers compute on the CPU: {devices}")
    parts = _place_parts(client, PG, workers)
    if device == "gpu":
        kw = dict(
            alpha=alpha,
            x0=x0,
            p=p,
            dw=dw,
            weighted=weighted,
            max_iter=max_iter,
            threshold=threshold,
            dtype=dtype,
            exchange=exchange,
            method=method,
        )
        args = [(f, PG.bounds, kw) for f in parts]
        out = run_spmd(client, _rank_gpu, args, workers=workers, name="pagerank")
        x = np.concatenate([o[0] for o in out])
        iters, err = out[0][1], out[0][2]
        if info is not None:
            info.update(device="gpu", workers=len(PG), timings=[o[3] for o in out])
        return x, iters, err
    step = "binned" if method == "binned" else "pull"
    x, iters, err = _loop_cpu(
        client, PG, parts, workers, alpha, x0, p, dw, weighted, max_iter, threshold, step
    )
    if info is not None:
        info.update(device="cpu", workers=len(PG), method=step)
    return x, iters, err


def _rank_gpu(comm, part, bounds, kw):
    return loop_gpu(part, comm, bounds, **kw)


def _cpu_iter(part, c, prev, p, dw, dsum, alpha, weighted, method):
    x_old = prev if isinstance(prev, np.ndarray) else prev[0]
    return step_cpu(part, c, x_old, p, dw, dsum, alpha=alpha, weighted=weighted, method=method)


def _join(*results):
    return np.concatenate([r[1] for r in results])


def _sums(*results):
    return sum(r[2] for r in results), sum(r[3] for r in results)


def _loop_cpu(client, PG, parts, workers, alpha, x0, p, dw, weighted, max_iter, threshold, method):
    n, bounds = PG.n, PG.bounds
    x = np.full(n, 1.0 / n) if x0 is None else x0
    p = np.full(n, 1.0 / n) if p is None else p
    dw = p if dw is None else dw
    inv = inverse_out(PG.parts[0], weighted)
    c = client.scatter(x * inv, broadcast=True, hash=False)
    dsum = float(x[inv == 0].sum())
    sl = lambda a, r: a[bounds[r] : bounds[r + 1]]  # noqa: E731
    put = lambda a: [client.scatter(sl(a, r), workers=[w], hash=False) for r, w in enumerate(workers)]  # noqa: E731
    state, pv = put(x), put(p)
    dv = pv if dw is p else put(dw)
    err, tag = np.inf, uuid.uuid4().hex[:8]
    for it in range(max_iter):
        state = [
            client.submit(
                _cpu_iter,
                parts[r],
                c,
                state[r],
                pv[r],
                dv[r],
                dsum,
                alpha,
                weighted,
                method,
                workers=[w],
                allow_other_workers=False,
                key=f"graphjobs-pagerank-{tag}-{it}-{r}",
            )
            for r, w in enumerate(workers)
        ]
        c = client.submit(_join, *state, workers=[workers[0]], key=f"graphjobs-pagerank-join-{tag}-{it}")
        sums = client.submit(_sums, *state, workers=[workers[0]], key=f"graphjobs-pagerank-sums-{tag}-{it}")
        err, dsum = sums.result()
        if err < threshold:
            break
    xs = client.gather([client.submit(operator.getitem, s, 0, pure=False) for s in state])
    return np.concatenate(xs), it + 1, err
