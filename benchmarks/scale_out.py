"""Scale-out benchmarks: multi-GPU PageRank and top-k PPR batch throughput on 1, 2, 4 GPU workers.

PageRank: time per iteration (NCCL all-gather), communication share, scaling, for each part's iteration
by pull and by binned passes. Same run, same graph: the single-GPU operator (``operators.pagerank``,
float32) by the same method is the baseline, beside it by the other one, and the partitioned code on one
GPU gives the denominator of the scaling efficiency ``t(1 GPU) / (g * t(g GPUs))``. The graph is an
R-MAT graph (Graph500 parameters) in degree order, as in the single-GPU benchmark; iterations are fixed
(40) so every configuration does the same work.
"""

from __future__ import annotations

import time

import numpy as np

import graphs
from benchmarks.common import Reporter, fresh
from benchmarks.pagerank import gpu_iteration_seconds

ITERATIONS = 40
METHODS = ("pull", "binned")


def _partitioned_seconds(client, pg, repeats=3, exchange="broadcast", method="pull"):
    """Median (per-iteration, communication per iteration) seconds over ranks' CUDA events."""
    from pipelines.distributed.pagerank import pagerank_partitioned

    runs = []
    for _ in range(repeats + 1):  # the first run places the parts, compiles and builds the plans
        info = {}
        pagerank_partitioned(
            pg,
            client,
            alpha=0.85,
            x0=None,
            p=None,
            dw=None,
            weighted=False,
            max_iter=ITERATIONS,
            threshold=-1.0,
            dtype=np.dtype(np.float32),
            device="gpu",
            info=info,
            exchange=exchange,
            method=method,
        )
        assert {t["method"] for t in info["timings"]} == {method}
        slowest = max(info["timings"], key=lambda t: t["loop_s"])
        runs.append((slowest["loop_s"] / ITERATIONS, max(t["comm_s"] for t in info["timings"]) / ITERATIONS))
    runs = sorted(runs[1:])
    return runs[len(runs) // 2]


def pagerank(rep: Reporter, scales, gpu_counts) -> None:
    import cupy as cp
    from distributed import Client

    from cluster import make_cluster

    available = cp.cuda.runtime.getDeviceCount()
    counts = [g for g in gpu_counts if g <= available]
    for scale in scales:
        name = f"rmat-{scale}"
        t0 = time.perf_counter()
        R = graphs.reorder(graphs.rmat(scale, device="gpu"))
        n, m = R.n, R.m
        single = {
            how: gpu_iteration_seconds(R, method=how, weighted=False, iterations=ITERATIONS)[0]
            for how in METHODS
        }
        t_part = time.perf_counter()
        parted = {g: graphs.partition(R, g) for g in counts}
        rep.emit(
            bench="build",
            graph=name,
            impl=f"rmat+reorder+partition {counts}",
            n=n,
            m=m,
            unit="s",
            median=time.perf_counter() - t0,
            partition_s=time.perf_counter() - t_part,
        )
        del R
        cp.get_default_memory_pool().free_all_blocks()
        base1 = {}
        for g in counts:
            pg = parted[g]
            runs = (
                [("broadcast", "pull"), ("broadcast", "binned")]
                if g == 1
                else [("broadcast", "pull"), ("halo", "pull"), ("halo", "binned")]
            )
            with make_cluster(g, device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
                timed = {
                    run: _partitioned_seconds(client, pg, exchange=run[0], method=run[1]) for run in runs
                }
            for (exchange, how), (per, comm) in timed.items():
                base1.setdefault(how, per)  # g == 1 comes first
                other = METHODS[1 - METHODS.index(how)]
                rep.emit(
                    bench="pagerank-mg",
                    graph=name,
                    impl=f"graphjobs NCCL {g} GPU, {exchange}, {how}",
                    gpus=g,
                    n=n,
                    m=m,
                    median=per * 1e3,
                    unit="ms/iter",
                    comm_ms=comm * 1e3,
                    comm_share=comm / per,
                    edges_per_part=pg.edge_counts().tolist(),
                    exchange=exchange,
                    method=how,
                    baseline={"impl": f"graphjobs single-GPU {how} (same run)", "median": single[how] * 1e3},
                    single_gpu_other={
                        "impl": f"graphjobs single-GPU {other} (same run)",
                        "median": single[other] * 1e3,
                    },
                    speedup=single[how] / per,
                    speedup_vs_best_single=min(single.values()) / per,
                    scaling_efficiency=base1[how] / (g * per),
                    efficiency_vs_single_gpu_operator=single[how] / (g * per),
                )


JOB_PASSES = 3


def topk(rep: Reporter, scale: int, gpu_counts, batch: int, workdir: str) -> None:
    """Top-k PPR batch job (k=100, chunks of 500 sources) throughput on g GPU workers vs one, same index:
    the median of JOB_PASSES jobs, each over its own uniformly random sources."""
    import cupy as cp
    from distributed import Client

    import pipelines
    from cluster import make_cluster

    counts = [g for g in gpu_counts if g <= cp.cuda.runtime.getDeviceCount()]
    folder = fresh(f"{workdir}/topk-index-{scale}")  # the build is timed
    with make_cluster(1, device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
        t0 = time.perf_counter()
        pipelines.run(pipelines.index_job(f"rmat:scale={scale},seed=0", out=folder), client, progress=False)
        rep.emit(
            bench="build",
            graph=f"rmat-{scale}",
            impl="topk index job",
            median=time.perf_counter() - t0,
            unit="s",
        )
    base = None
    for g in counts:
        with make_cluster(g, device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
            warm = pipelines.topk_ppr_job(
                index=folder,
                sources=pipelines.RandomSources(250 * 4 * g),
                chunk=250,
                seed=100 + g,
                out=fresh(f"{workdir}/warm-{g}"),
                overwrite=True,
            )
            pipelines.run(warm, client, progress=False)  # every worker loads the graph and the index once
            rates, early = [], []
            for rep_i in range(JOB_PASSES):  # each pass its own random sources
                job = pipelines.topk_ppr_job(
                    index=folder,
                    sources=pipelines.RandomSources(batch),
                    chunk=500,
                    seed=7 + rep_i,
                    k=100,
                    out=fresh(f"{workdir}/batch-{g}-{rep_i}"),
                    overwrite=True,
                )
                t0 = time.perf_counter()
                summary = pipelines.run(job, client, progress=False)
                rates.append(summary["queries"] / (time.perf_counter() - t0))
                early.append(summary["without_rounds"])
        rate = float(np.median(rates))
        base = rate if g == 1 else base
        rep.emit(
            bench="topk-mg",
            graph=f"rmat-{scale}",
            impl=f"topk-ppr job, {g} GPU workers",
            gpus=g,
            median=rate,
            unit="queries/s",
            rates=rates,
            queries=batch,
            k=100,
            chunk=500,
            without_rounds=early,
            baseline=None if base is None or g == 1 else {"impl": "same job, 1 GPU worker", "median": base},
            speedup=None if base is None else rate / base,
        )


def influence(rep: Reporter, gpu_counts, *, n: int = 1_000_000, degree: int = 16, k: int = 50, eps=0.05):
    """IMM (IC, weighted cascade) with RR samples spread over g GPU workers vs the one-GPU operator."""
    import cupy as cp
    from distributed import Client

    from cluster import make_cluster
    from operators import influence_maximization
    from pipelines.distributed.influence import influence_maximization as distributed_imm

    counts = [g for g in gpu_counts if g <= cp.cuda.runtime.getDeviceCount()]
    graph = graphs.barabasi_albert(n, degree, seed=0)
    name = f"ba-{n}-{degree}"
    gd = graph.to("gpu")
    influence_maximization(gd, k, epsilon=eps, seed=9)  # compile every kernel the timed runs use
    single, one = _median_run(lambda g=gd: influence_maximization(g, k, epsilon=eps, seed=1))
    del gd
    cp.get_default_memory_pool().free_all_blocks()
    for g in counts:
        with make_cluster(g, device="gpu", dashboard_address=":0") as cl, Client(cl) as client:
            distributed_imm(graph, k, client, epsilon=eps, seed=9)  # compile on the workers
            seconds, res = _median_run(lambda c=client: distributed_imm(graph, k, c, epsilon=eps, seed=1))
        rep.emit(
            bench="imm-mg",
            graph=name,
            impl=f"graphjobs IMM, samples on {g} GPU workers",
            gpus=g,
            median=seconds,
            unit="s",
            n=n,
            m=graph.m,
            k=k,
            epsilon=eps,
            theta=res.theta,
            rr_sets=res.rr_sets,
            same_seeds=res.seeds.tolist() == one.seeds.tolist(),
            phases=res.seconds,
            one_gpu_phases=one.seconds,
            baseline={"impl": "graphjobs IMM on one GPU, no Dask (same run)", "median": single},
            speedup=single / seconds,
        )


def _median_run(fn, repeats: int = 3):
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs, and that run's result."""
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        runs.append((time.perf_counter() - t0, out))
    runs.sort(key=lambda r: r[0])
    return runs[len(runs) // 2]
