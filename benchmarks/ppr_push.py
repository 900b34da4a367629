"""Single-source PPR at equal accuracy: PowerPush (CPU), push, pull, the hybrid and power iteration per
L1 target, beside cuGraph's personalized PageRank (GPU) and NetworkX's (CPU) stopped at the same
measured error.

Per graph and L1 target (``tol`` = 1e-4, 1e-6, 1e-8: ``operators.ppr``'s bound on each row's L1 error):
``bench='ppr'`` rows give the median milliseconds per source, one source per call, over a fixed set of
random sources with out-edges (seed 1), with every row's measured L1 error against exact PPR (float64
``pagerank`` personalized to the source, to a certified 8e-12) and its certified bound.
``bench='ppr-batch'`` rows give sources per second when one call solves a batch (the default
``block``; on the CPU one row, ``method="auto"``), with the measured error of its first rows.

Peers, each stopped at the same measured accuracy: cuGraph (pylibcugraph, float32) stops when an
iteration changes the vector by less than ``epsilon`` in L1; it runs on the same sources at
``epsilon = tol (1 - alpha) / alpha * 4**j`` for j = 2, 1, 0, -1, ... and the first ``epsilon`` whose
worst measured error is at most ``tol`` is timed (``reached`` false, with its error, when none is).
NetworkX (CPU) likewise, with its ``tol`` (a bound on the L1 change over n) scaled the same way.
"""

from __future__ import annotations

import time

import numpy as np

import graphs
from graphs._device import to_host
from operators import pagerank, ppr
from operators.ppr.cost import cost_model

from . import cugraph_peer
from .common import Reporter, fresh
from .topk_ppr import _sources, _sync

METHODS = ("powerpush", "push", "pull", "hybrid", "power")
CPU_ONLY = ("powerpush",)
TARGETS = (1e-4, 1e-6, 1e-8)
ALPHA = 0.8  # ppr's default, used throughout
BATCH_BUDGET_S = 60.0  # a method's batch row is left out where its sources one at a time would take longer


def batch_too_slow(median_ms: float | None, count: int) -> bool:
    """Whether ``count`` sources at ``median_ms`` each (the method's one-at-a-time median) would take
    longer than ``BATCH_BUDGET_S``: its batch row is then left out (said on stdout), so that the slow
    pure models at R-MAT 24 and 1e-8 do not take a device call's whole time."""
    return median_ms is not None and median_ms * count / 1e3 > BATCH_BUDGET_S


def _exact(g, srcs) -> np.ndarray:
    """Exact rows, by code independent of ``ppr``'s: float64 PageRank personalized to the source (its
    dangling vertices restart there too) until an iteration changes the row by less than 2e-12 in L1,
    which certifies an error of at most ``alpha / (1 - alpha) * 2e-12`` = 8e-12."""
    rows = []
    for s in srcs:
        x = pagerank(
            g, alpha=ALPHA, personalization={s: 1.0}, tol=2e-12 / g.n, dtype=np.float64, max_iter=2000
        )
        rows.append(to_host(x))
    return np.stack(rows)


def _l1(x, exact) -> list[float]:
    return [float(v) for v in np.abs(to_host(x).astype(np.float64) - exact[: len(x)]).sum(axis=1)]


def _per_source(g, srcs, **opts):
    """Milliseconds of each one-source call, the rows, and the info of every call."""
    ms, rows, bounds, iters = [], [], [], []
    for s in srcs:
        info: dict = {}
        _sync(g.device)
        t0 = time.perf_counter()
        x = ppr(g, [s], info=info, **opts)
        _sync(g.device)
        ms.append((time.perf_counter() - t0) * 1e3)
        rows.append(to_host(x)[0])
        bounds.append(info["l1_bound"][0])
        iters.append(info.get("iterations", [None])[0])
    return np.array(ms), np.array(rows), bounds, iters


def _epsilons(tol: float, alpha: float = ALPHA):
    return [tol * (1 - alpha) / alpha * 4.0**j for j in (2, 1, 0, -1, -2, -3, -4)]


def _peer_matched(peer, g, srcs, exact, tol: float, alpha: float = ALPHA) -> dict:
    """cuGraph per source at the largest ``epsilon`` whose worst measured L1 error is at most ``tol``."""
    ids = [int(v) for v in g.internal_ids(srcs)]
    peer.ppr(ids[0], alpha=alpha, epsilon=1e-3)  # warm-up
    best = None
    for eps in _epsilons(tol, alpha):
        ms, err = [], []
        for i, v in enumerate(ids):
            _sync("gpu")
            t0 = time.perf_counter()
            x = peer.ppr(v, alpha=alpha, epsilon=eps, max_iter=1000)
            _sync("gpu")
            ms.append((time.perf_counter() - t0) * 1e3)
            err.append(float(np.abs(to_host(x).astype(np.float64) - exact[i]).sum()))
        run = {
            "impl": cugraph_peer.NAME,
            "median": float(np.median(ms)),
            "epsilon": eps,
            "l1": err,
            "l1_max": max(err),
            "reached": max(err) <= tol,
        }
        if run["reached"]:
            return run
        best = run if best is None or run["l1_max"] < best["l1_max"] else best
    return best


def _nx_matched(h, labels, exact, tol: float, alpha: float = ALPHA) -> dict:
    """NetworkX per source at the largest ``tol`` of its own whose worst measured L1 error is <= ``tol``."""
    import networkx as nx

    n, best = h.number_of_nodes(), None
    for eps in _epsilons(tol, alpha):
        ms, err = [], []
        for i, s in enumerate(labels):
            t0 = time.perf_counter()
            d = nx.pagerank(h, alpha=alpha, personalization={s: 1}, tol=eps / n, max_iter=10_000)
            ms.append((time.perf_counter() - t0) * 1e3)
            err.append(float(np.abs(np.array([d[v] for v in h.graph["order"]]) - exact[i]).sum()))
        run = {
            "impl": f"networkx {nx.__version__}",
            "median": float(np.median(ms)),
            "nx_tol": eps / n,
            "l1": err,
            "l1_max": max(err),
            "reached": max(err) <= tol,
        }
        if run["reached"]:
            return run
        best = run if best is None or run["l1_max"] < best["l1_max"] else best
    return best


def run_graph(rep: Reporter, name: str, g, *, sources: int = 10, batch: int = 64, peers=True, methods=None):
    """Per-source and batched rows of every method at every L1 target, beside the peer."""
    device = g.device
    srcs = _sources(g, max(sources, batch), seed=1)
    one = srcs[:sources]
    ppr(g, one[:1], method="power", tol=1e-3)  # builds the transposed matrix (not timed)
    exact = _exact(g, one)
    common = dict(graph=name, n=g.n, m=g.m, sources=len(one))
    peer = cugraph_peer.Peer(g) if peers and device == "gpu" and cugraph_peer.available() else None
    nxg = None
    if peers and device == "cpu":
        nxg = _networkx(g)
    for tol in TARGETS:
        if device == "cpu" and tol < 1e-6:
            continue
        base = None
        if peer is not None:
            base = _peer_matched(peer, g, one, exact, tol)
        elif nxg is not None:
            base = _nx_matched(nxg, one, exact, tol)
        medians = {}
        for method in _methods(device, methods):
            ppr(g, one[:1], method=method, tol=tol)  # compile, plan
            ms, rows, bounds, iters = _per_source(g, one, method=method, tol=tol)
            l1 = _l1(rows, exact)
            medians[method] = float(np.median(ms))
            extra = {} if base is None else {"baseline": base, "speedup": base["median"] / medians[method]}
            rep.emit(
                bench="ppr",
                impl=f"{method} {device}",
                median=medians[method],
                unit="ms",
                **common,
                tol=tol,
                l1=l1,
                l1_max=max(l1),
                l1_bound_max=max(bounds),
                within_tol=max(l1) <= tol,
                iterations=iters,
                **extra,
            )
        pure = min(medians.get("push", np.inf), medians.get("pull", np.inf))
        if "hybrid" in medians and pure < np.inf:
            rep.emit(
                bench="ppr-hybrid",
                impl=f"hybrid vs best of push, pull {device}",
                median=medians["hybrid"],
                unit="ms",
                **common,
                tol=tol,
                baseline={"impl": "best pure model", "median": pure},
                speedup=pure / medians["hybrid"],
            )
        for method in ("auto",) if device == "cpu" else _methods(device, methods):
            if batch_too_slow(medians.get(method), len(srcs)):
                print(
                    f"ppr-batch {name} {method} tol={tol:g}: left out (one at a time, about "
                    f"{medians[method] * len(srcs) / 1e3:.0f} s)",
                    flush=True,
                )
                continue
            ppr(g, srcs[:2], method=method, tol=tol)  # compile the batch's shapes
            info: dict = {}
            _sync(device)
            t0 = time.perf_counter()
            x = ppr(g, srcs, method=method, tol=tol, info=info)
            _sync(device)
            rate = len(srcs) / (time.perf_counter() - t0)
            l1 = _l1(to_host(x[: len(one)]), exact)
            extra = {}
            if base is not None:
                peer_rate = 1e3 / base["median"]
                extra = {
                    "baseline": {**base, "median": peer_rate, "unit": "sources/s one at a time"},
                    "speedup": rate / peer_rate,
                }
            rep.emit(
                bench="ppr-batch",
                impl=f"{method} batch {device}",
                median=rate,
                unit="sources/s",
                **common,
                batch=len(srcs),
                tol=tol,
                l1=l1,
                l1_max=max(l1),
                within_tol=max(l1) <= tol,
                l1_bound_max=max(b for b in info["l1_bound"] if b is not None),
                **extra,
            )
            del x


def _methods(device: str, methods=None) -> list[str]:
    """The methods of ``METHODS`` that run on ``device`` (only those named in ``methods``, if given)."""
    runs = [m for m in METHODS if device == "cpu" or m not in CPU_ONLY]
    return [m for m in runs if methods is None or m in methods]


def _networkx(g):
    """The NetworkX DiGraph of ``g`` (vertices in internal order, recorded as ``graph['order']``)."""
    import networkx as nx

    h = nx.DiGraph()
    labels = to_host(g.ids) if g.ids is not None else np.arange(g.n)
    h.add_nodes_from(labels.tolist())
    deg = np.diff(to_host(g.indptr))
    h.add_edges_from(
        zip(labels[np.repeat(np.arange(g.n), deg)].tolist(), labels[to_host(g.indices)].tolist(), strict=True)
    )
    h.graph["order"] = labels.tolist()
    if h.number_of_edges() != g.m:  # its PPR would be another graph's: say so rather than compare
        raise ValueError(
            f"the graph repeats edges ({g.m:,} edges, {h.number_of_edges():,} distinct), which "
            "NetworkX's DiGraph merges: compare on a deduplicated graph (dedupe=True)"
        )
    return h


def run_job(rep: Reporter, name: str, source, *, sources: int = 10_000, workdir: str = "/tmp/gj-ppr-job"):
    """The PPR job (k=100, chunks of 500 sources) on one GPU worker: default batches against one
    source at a time (``block=1``), same cluster, graph loaded once per worker before timing."""
    from distributed import Client

    import pipelines
    from cluster import make_cluster

    rates = {}
    with make_cluster(1, device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
        for block in (None, 1):
            tag = "default" if block is None else block
            same = dict(chunk=500, block=block, workdir=workdir, overwrite=True)
            warm = pipelines.ppr_job(
                source,
                pipelines.RandomSources(500),
                seed=100,
                out=fresh(f"{workdir}/warm-{name}-{tag}"),
                **same,
            )
            pipelines.run(warm, client, progress=False)
            job = pipelines.ppr_job(
                source,
                pipelines.RandomSources(sources),
                seed=7,
                out=fresh(f"{workdir}/batch-{name}-{tag}"),
                **same,
            )
            t0 = time.perf_counter()
            summary = pipelines.run(job, client, progress=False)
            rates[tag] = summary["queries"] / (time.perf_counter() - t0)
    rep.emit(
        bench="ppr-job",
        graph=name,
        impl="ppr job, 1 GPU worker, batches",
        median=rates["default"],
        unit="queries/s",
        queries=sources,
        topk=100,
        tol=1e-6,
        baseline={"impl": "same job, block=1", "median": rates[1]},
        speedup=rates["default"] / rates[1],
    )


def run(rep: Reporter, device: str, dataset_dir, scales, methods=None) -> None:
    t0 = time.perf_counter()
    model = cost_model(device)
    rep.emit(
        bench="ppr-cost",
        impl=f"cost model {device}",
        median=time.perf_counter() - t0,
        unit="s",
        l1=model.l1,
        l2=model.l2,
        l3=model.l3,
        blocks=model.blocks,
    )
    warm = graphs.rmat(10, seed=1, device=device)
    for method in _methods(device):
        ppr(warm, _sources(warm, 2, 0), method=method)
    for name in ("soc-Epinions1", "soc-Slashdot0902"):
        path = None if dataset_dir is None else dataset_dir / f"{name}.txt.gz"
        if path is not None and path.is_file():
            g = graphs.read_edgelist(path, dedupe=True).to(device)
            run_graph(
                rep,
                name,
                g,
                sources=10 if device == "gpu" else 3,
                batch=64 if device == "gpu" else 4,
                methods=methods,
            )
    for s in scales:
        g = graphs.rmat(s, seed=0, device=device)
        run_graph(
            rep, f"rmat-{s}", g, sources=10 if s < 24 else 5, batch=64 if s < 24 else 32, methods=methods
        )
        del g


def _reached(g, sources) -> list[np.ndarray]:
    """For each source, whether each vertex is reachable from it (exactly where PPR is positive)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order

    a = sp.csr_matrix((np.ones(g.m), to_host(g.indices), to_host(g.indptr)), shape=(g.n, g.n))
    masks = []
    for s in sources:
        masks.append(np.zeros(g.n, dtype=bool))
        masks[-1][breadth_first_order(a, int(s), directed=True, return_predecessors=False)] = True
    return masks


def run_precision(rep: Reporter, device: str, dataset_dir, scales, sources: int = 10, k: int = 100) -> None:
    """precision@k of ``ppr(..., topk=k)`` at the default ``tol`` (the PPR job's call) against exact PPR
    (``_exact``), on the SNAP graphs and R-MAT ``scales``: a listed vertex is right when its exact value
    reaches the exact k-th (ties count), over ``sources`` random sources with out-edges (seed 1)."""
    todo = []
    for name in ("soc-Epinions1", "soc-Slashdot0902"):
        path = None if dataset_dir is None else dataset_dir / f"{name}.txt.gz"
        if path is not None and path.is_file():
            todo.append((name, lambda p=path: graphs.read_edgelist(p, dedupe=True).to(device)))
    todo += [(f"rmat-{s}", lambda s=s: graphs.rmat(s, seed=0, device=device)) for s in scales]
    for name, make in todo:
        g = make()
        srcs = _sources(g, sources, seed=1)
        exact = _exact(g, srcs)
        info: dict = {}
        t0 = time.perf_counter()
        labels, _ = ppr(g, srcs, topk=k, info=info)
        seconds = time.perf_counter() - t0
        hits = wanted = 0
        reached = _reached(g, g.internal_ids(srcs))
        for row, count, want, mask in zip(labels, info["counts"], exact, reached, strict=True):
            want = np.where(mask, want, 0.0)  # unreached: 0 (the oracle leaves ~1e-15 there)
            kk = min(k, int((want > 0).sum()))
            kth = np.sort(want)[-kk]
            got = g.internal_ids(row[:count])[:kk]  # a short row lists only what the source reaches
            hits += int((want[got] >= kth - 1e-12).sum())
            wanted += kk
        rep.emit(
            bench="ppr-precision",
            impl=f"ppr topk={k} default tol {device}",
            graph=name,
            n=g.n,
            m=g.m,
            median=hits / wanted,
            unit=f"precision@{k}",
            sources=len(srcs),
            tol=1e-6,
            l1_bound_max=max(info["l1_bound"]),
            seconds=seconds,
        )
        del g
