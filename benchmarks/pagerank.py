"""PageRank benchmarks: ours (pull, push) vs cuSPARSE and cuGraph (where installed) on the GPU, vs
NetworkX/SciPy on the CPU."""

from __future__ import annotations

import numpy as np

import graphs
from benchmarks import cugraph_peer
from benchmarks.common import Reporter, copy_rate, gpu_time, wall
from operators import pagerank
from operators.pagerank import auto_method, inverse_out_weight
from operators.pagerank.binned import TUNING as BINNED
from operators.pagerank.binned import binned_layout_of, binned_order
from operators.pagerank.order import KEY as ORDER_KEY
from operators.pagerank.order import degree_ordered

SNAP_GRAPHS = ["wiki-Vote", "email-Enron", "soc-Epinions1", "soc-Slashdot0902", "ca-CondMat"]


def _iteration_seconds(run_k):
    """Per-iteration seconds from runs of 10 and 50 iterations (set-up cancels), and set-up."""
    t10, _ = wall(lambda: run_k(10), repeats=5)
    t50, _ = wall(lambda: run_k(50), repeats=5)
    per = (t50 - t10) / 40
    return per, max(0.0, t10 - 10 * per)


def gpu_iteration_seconds(g, *, method, weighted, iterations=40, repeats=5):
    """Median per-iteration and set-up seconds of the GPU power iteration, from its CUDA events."""
    from operators.pagerank.gpu import pagerank_gpu

    inv = inverse_out_weight(g, weighted)
    runs = []
    for _ in range(repeats + 1):  # the first run compiles and builds the plan
        *_, t = pagerank_gpu(
            g,
            method=method,
            alpha=0.85,
            x0=None,
            p=None,
            dw=None,
            inv_out=inv,
            weighted=weighted,
            max_iter=iterations,
            threshold=-1.0,
            dtype=np.float32,
        )
        runs.append((t["loop_s"] / t["launched"], t["setup_s"]))
    runs = sorted(runs[1:])
    return runs[len(runs) // 2]


def _bytes_ours(g, weighted, method="pull"):
    n, m = g.n, g.m
    if method == "binned":  # fill: source offset in, contribution out (+weight); sum: both in; vertices
        return (12 + (4 if weighted else 0)) * m + 4 * n + 16 * n
    # in-edge ids (+weights), indptr, vertex order, x_old/inv_out read, x_new/c_new written, one gather each
    return (4 + (4 if weighted else 0)) * m + 8 * (n + 1) + 4 * n + 16 * n + 4 * n


def gpu(rep: Reporter, scales, weighted_scales) -> None:
    import cupy as cp
    import cupyx.scipy.sparse as cps

    sync = cp.cuda.Device().synchronize
    rate = copy_rate()
    rep.emit(bench="copy", impl="device-to-device copy", median=rate / 1e12, unit="TB/s")
    for scale in scales:
        for weighted in (False, True) if scale in weighted_scales else (False,):
            name = f"rmat-{scale}" + ("-w" if weighted else "")
            t_gen, _ = wall(
                lambda s=scale, w=weighted: graphs.rmat(s, device="gpu", weighted=w),
                repeats=1,
                warmup=0,
                sync=sync,
            )
            G = graphs.rmat(scale, device="gpu", weighted=weighted)
            sync()
            rep.emit(bench="build", graph=name, impl="rmat+csr", median=t_gen, unit="s", n=G.n, m=G.m)
            t_r, _ = wall(lambda g=G: graphs.reorder(g), repeats=1, warmup=0, sync=sync)
            rep.emit(bench="build", graph=name, impl="reorder-by-degree", median=t_r, unit="s", n=G.n, m=G.m)
            g = G
            for layout in ("original", "degree-order"):
                if layout == "degree-order":  # each layout runs with one graph held, as a user's call
                    g = graphs.reorder(G)  # would: method='auto' depends on the free memory
                    del G
                t_t, _ = wall(g.transpose, repeats=1, warmup=0, sync=sync)
                rep.emit(bench="build", graph=name, layout=layout, impl="transpose", median=t_t, unit="s")
                _pagerank_layout(rep, cp, cps, g, name, layout, weighted, sync, rate)
                g.forget_derived()  # its transpose and layouts: the next layout runs with one graph's
                cp.get_default_memory_pool().free_all_blocks()  # builds held, as a user's call would
            del g
            cp.get_default_memory_pool().free_all_blocks()


def cusparse_baseline(cp, cps, g, weighted):
    """cuSPARSE SpMV alone, and the power-iteration step a CuPy user writes around it (seconds)."""
    n = g.n
    inv = inverse_out_weight(g, weighted)
    T = g.transpose()
    data = inv[T.indices].astype(cp.float32)
    if weighted:
        data *= T.weights
    x = cp.full(n, 1.0 / n, dtype=cp.float32)
    spmv, index_types = _cusparse_spmv(cp, cps, data, T)
    # a check that the product is the graph's: each vertex with out-edges passes on all of its 1/n
    mass, movers = float(spmv(x).sum(dtype=cp.float64)) * n, int((inv != 0).sum())
    if abs(mass - movers) > 1e-3 * max(1.0, mass):
        raise RuntimeError(f"cuSPARSE SpMV moved {mass:.6g} / n, not {movers} / n")
    dmask = (inv == 0).astype(cp.float32)
    t_spmv, _ = gpu_time(lambda: spmv(x))

    def power_step():
        y = 0.85 * spmv(x) + (0.85 * float(x @ dmask) + 0.15) / n
        return float(cp.abs(y - x).sum())

    t_power, _ = gpu_time(power_step)
    return t_spmv, t_power, index_types


def _cusparse_spmv(cp, cps, data, T):
    """``x -> T @ x`` by cuSPARSE, and how. CuPy's CSR matrices hold 32-bit indices, so past 2**31 - 1
    edges the matrix is cut into row blocks of at most 2**30 edges, each its own SpMV into its slice of
    one output (why not 64-bit indices, or blocks up to 2**31 - 1: benchmarks/RESULTS.md, PageRank)."""
    blocks = _row_blocks(T.indptr, 2**31 - 1 if T.m < 2**31 else 2**30)
    mats = []
    for lo, hi in blocks:
        start, stop = int(T.indptr[lo]), int(T.indptr[hi])
        offsets = (T.indptr[lo : hi + 1] - start).astype(cp.int32)
        A = cps.csr_matrix((data[start:stop], T.indices[start:stop], offsets), shape=(hi - lo, T.n))
        if len(blocks) > 1:  # R-MAT repeats edges: SpMV adds them as stored (as ours does), where CuPy
            A._has_canonical_format = True  # would first merge them into a copy that does not fit here
        mats.append(A)
    if len(mats) == 1:
        return (lambda x: mats[0] @ x), "int32, one matrix"
    y = cp.empty(T.n, dtype=cp.float32)

    def spmv(x):
        for (lo, hi), A in zip(blocks, mats, strict=True):
            y[lo:hi] = A @ x
        return y

    return spmv, f"int32, {len(mats)} row blocks"


def _row_blocks(indptr, most: int) -> list[tuple[int, int]]:
    """Consecutive row ranges [lo, hi) covering all rows, each holding at most ``most`` entries (a row
    holding more is a range alone)."""
    ptr = np.asarray(indptr.get() if hasattr(indptr, "get") else indptr)
    blocks, lo, n = [], 0, len(ptr) - 1
    while lo < n:
        hi = int(np.searchsorted(ptr, ptr[lo] + most, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        blocks.append((lo, hi))
        lo = hi
    return blocks


def _cugraph_rows(rep, g, name, layout, tol, t_spmv, sync):
    """cuGraph's PageRank per iteration and to the same stop rule as ours; its per-iteration time."""
    peer = cugraph_peer.Peer(g)
    per = peer.iteration_seconds()
    common = dict(bench="pagerank", graph=name, layout=layout, n=g.n, m=g.m)
    rep.emit(
        **common,
        impl=f"{cugraph_peer.NAME} f32",
        median=per * 1e3,
        unit="ms/iter",
        baseline={"impl": "cusparse-spmv", "median": t_spmv * 1e3},
        speedup=t_spmv / per,
        graph_build_s=peer.build_s,
    )
    t_full, _ = wall(lambda: peer.pagerank(epsilon=1e-6), repeats=3, sync=sync)
    ours = pagerank(g, tol=tol, max_iter=1000)
    l1 = float(abs(peer.pagerank(epsilon=1e-6).astype(ours.dtype) - ours).sum())
    rep.emit(
        **common,
        impl=f"{cugraph_peer.NAME} end-to-end, L1 change < 1e-6",
        median=t_full * 1e3,
        unit="ms",
        l1_vs_graphjobs=l1,
    )
    return {"impl": cugraph_peer.NAME, "median": per * 1e3}, t_full


def _pagerank_layout(rep, cp, cps, g, name, layout, weighted, sync, rate):
    """One layout's rows; ``rate`` is the copy rate measured in this run (bytes/s), the bandwidth
    fractions' denominator."""
    n, m = g.n, g.m
    t_spmv, t_power, index_types = cusparse_baseline(cp, cps, g, weighted)
    bytes_spmv = 8 * m + 4 * (n + 1) + 8 * n
    tol = 1e-6 / n  # an L1 change below 1e-6 (the default n * tol rule stops after one iteration here)
    peer, peer_full = (
        _cugraph_rows(rep, g, name, layout, tol, t_spmv, sync) if cugraph_peer.available() else ({}, None)
    )
    g.transpose()  # the binned layout is built from it (timed with the graph's other builds)
    bits = BINNED[4]

    def build_binned():  # what the first binned call builds: the permutation where needed, the layout
        return binned_layout_of(g, weighted, **bits, perm=binned_order(g, keep=False))

    t_lay, _ = wall(build_binned, repeats=3, warmup=1, sync=sync)
    rep.emit(
        bench="build",
        graph=name,
        layout=layout,
        impl="binned layout (float32)",
        median=t_lay,
        unit="s",
        n=n,
        m=m,
    )
    for method in ("pull", "binned", "push"):
        per, setup = gpu_iteration_seconds(g, method=method, weighted=weighted)
        b = _bytes_ours(g, weighted, method)
        extra = {"peer": peer, "speedup_vs_peer": peer["median"] / (per * 1e3)} if peer else {}
        rep.emit(
            bench="pagerank",
            graph=name,
            layout=layout,
            impl=f"graphjobs-{method} f32",
            n=n,
            m=m,
            median=per * 1e3,
            unit="ms/iter",
            setup_ms=setup * 1e3,
            baseline={"impl": "cusparse-spmv", "median": t_spmv * 1e3, "index_types": index_types},
            baseline_power_iteration_ms=t_power * 1e3,
            speedup=t_spmv / per,
            speedup_vs_power_iteration=t_power / per,
            bytes_per_iter=b,
            copy_rate_bytes_per_s=rate,
            bandwidth_fraction=b / per / rate,
            baseline_bandwidth_fraction=bytes_spmv / t_spmv / rate,
            **extra,
        )
    # end to end through operators.pagerank, as it is, and with reorder=True: iterating on a
    # degree-ordered copy built on the first call and kept, unless binned runs and orders its own layout
    # (the row's degree_order says which); the copy's build timed once, beside cuGraph's
    method = auto_method(g, np.float32, weighted)  # what the timed calls run (it depends on free memory)
    t_full, _ = wall(lambda: pagerank(g, tol=tol, max_iter=1000), repeats=3, sync=sync)
    rows = [("graphjobs end-to-end, L1 change < 1e-6", t_full, {"method": method})]
    if layout == "original":  # the degree-order layout is in that order already
        g.forget_derived()  # as a user's first reorder=True call finds it: no layout of this order held
        cp.get_default_memory_pool().free_all_blocks()
        t_order, _ = wall(lambda: degree_ordered(g)[0].transpose(), repeats=1, warmup=0, sync=sync)
        g.forget_derived(ORDER_KEY)
        info: dict = {}  # whether reorder=True iterated on the copy (not where binned orders itself)
        t_ord, _ = wall(
            lambda: pagerank(g, tol=tol, max_iter=1000, reorder=True, info=info), repeats=3, sync=sync
        )
        g.forget_derived(ORDER_KEY)  # the copy's memory back before the next layout
        ordered = dict(degree_order=info["degree_order"], degree_order_build_s=t_order)
        baseline = {
            "baseline": {"impl": "graphjobs end-to-end", "median": t_full * 1e3},
            "speedup": t_full / t_ord,
        }
        rows.append(("graphjobs end-to-end, reorder=True", t_ord, {**ordered, **baseline}))
    iters = _iterations_to_converge(g, tol, weighted)
    for impl, secs, fields in rows:
        peer_fields = (
            {}
            if peer_full is None
            else {
                "peer": {"impl": cugraph_peer.NAME, "median": peer_full * 1e3},
                "speedup_vs_peer": peer_full / secs,
            }
        )
        rep.emit(
            bench="pagerank",
            graph=name,
            layout=layout,
            impl=impl,
            n=n,
            m=m,
            median=secs * 1e3,
            unit="ms",
            iterations=iters,
            tol=tol,
            **fields,
            **peer_fields,
        )


def _iterations_to_converge(g, tol, weighted):
    from operators.pagerank.gpu import pagerank_gpu

    _, iters, _, _ = pagerank_gpu(
        g,
        method="pull",
        alpha=0.85,
        x0=None,
        p=None,
        dw=None,
        inv_out=inverse_out_weight(g, weighted),
        weighted=weighted,
        max_iter=1000,
        threshold=g.n * tol,
        dtype=np.float32,
    )
    return iters


def cpu(rep: Reporter, dataset_dir, scales) -> None:
    import networkx as nx

    from operators.pagerank.cpu import _pull_cpu

    cases = []
    for name in SNAP_GRAPHS:
        path = None if dataset_dir is None else dataset_dir / f"{name}.txt.gz"
        if path is not None and path.is_file():
            undirected = name.startswith(("ca-", "email-"))
            cases.append((name, graphs.read_edgelist(path, directed=not undirected, dedupe=True)))
    cases += [(f"rmat-{s}", graphs.rmat(s, device="cpu", dedupe=True)) for s in scales]
    for name, g in cases:
        t_ours, _ = wall(lambda g=g: pagerank(g), repeats=5)
        Gn = nx.DiGraph() if g.directed else nx.Graph()
        src, dst, _ = g.edges()
        Gn.add_nodes_from(range(g.n))
        Gn.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
        t_nx, _ = wall(lambda Gn=Gn: nx.pagerank(Gn), repeats=3, warmup=0)
        rep.emit(
            bench="pagerank",
            graph=name,
            impl="graphjobs-pull cpu",
            n=g.n,
            m=g.m,
            median=t_ours * 1e3,
            unit="ms",
            baseline={"impl": "networkx.pagerank", "median": t_nx * 1e3},
            speedup=t_nx / t_ours,
        )
        # per iteration against the SciPy step NetworkX runs (x @ A + dangling + teleport)
        T, inv = g.transpose(), inverse_out_weight(g, False)
        A = g.to_scipy().astype(np.float64)
        A = A.multiply(inv[:, None]).tocsr()
        x = np.full(g.n, 1.0 / g.n)
        dm = inv == 0

        def scipy_step(A=A, x=x, dm=dm, n=g.n):
            y = 0.85 * (x @ A + x[dm].sum() / n) + 0.15 / n
            return np.abs(y - x).sum()

        t_sp, _ = wall(scipy_step, repeats=20)
        p = np.full(g.n, 1.0 / g.n)
        w = np.empty(0, dtype=np.float32)
        per, _ = _iteration_seconds(
            lambda k, T=T, inv=inv, p=p, w=w: _pull_cpu(
                T.indptr, T.indices, w, False, inv, p.copy(), p, p, 0.85, k, -1.0
            )
        )
        rep.emit(
            bench="pagerank",
            graph=name,
            impl="graphjobs-pull cpu",
            n=g.n,
            m=g.m,
            median=per * 1e3,
            unit="ms/iter",
            baseline={"impl": "scipy csr step", "median": t_sp * 1e3},
            speedup=t_sp / per,
        )
