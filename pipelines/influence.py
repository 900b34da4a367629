"""The influence-maximization job: load -> CSR, IMM seeds on one worker, Monte Carlo check, seeds to CSV.

The IMM task runs where the graph is loaded once (``pipelines._state``) and on that worker's device;
the seeds it picks depend only on the graph and the parameters (CPU and GPU draw the same RR samples).
A second task estimates the seeds' spread by forward simulation, independently of the RR samples.
"""

from __future__ import annotations

import functools
from pathlib import Path

import dask
import numpy as np
from dask.base import tokenize

import operators
from graphs.errors import OptionError
from operators._checks import check_count
from operators.options import IMMOptions
from pipelines.distributed.influence import influence_maximization as distributed_imm

from ._output import SEEDS_HEADER, check_result_token, write_csv_result
from ._progress import in_task
from .job import Job
from .stages import GraphHandle, cluster_workers, default_workdir, load_stage
from .summary import InfluenceSummary


def influence_job(
    source,
    k: int,
    *,
    out="seeds.csv",
    epsilon=IMMOptions.epsilon,
    ell=IMMOptions.ell,
    model=IMMOptions.model,
    weights=IMMOptions.weights,
    rounds=IMMOptions.rounds,
    seed=IMMOptions.seed,
    max_rr_sets=IMMOptions.max_rr_sets,
    n_sim=10_000,
    spread_rtol=0.01,
    workdir=None,
    directed=True,
    read_options=None,
    distributed="auto",
    overwrite=False,
) -> Job:
    """IMM influence maximization as a Dask graph (nothing runs until ``run``).

    Parameters
    ----------
    source : path, generator spec or CSRGraph
        The graph, as in ``pagerank_job``.
    k : int
        Seeds (per round).
    out : path
        CSV file of the seeds: ``rank``, ``vertex`` (original label), ``round``, ``gain`` (its
        marginal spread as estimated from the RR samples).
    epsilon, ell, model, weights, rounds, seed, max_rr_sets
        As in ``operators.influence_maximization``.
    n_sim : int
        At most this many forward simulations estimate the seeds' spread (0: skip).
    spread_rtol : float or None
        They stop once the estimate's standard error is at most this fraction of it (None: all
        ``n_sim``; ``operators.influence_spread``'s ``rtol``). The summary states the runs made.
    workdir, directed, read_options
        Artifact folder and ``read_edgelist`` options.
    distributed : bool or 'auto'
        Spread the RR samples over all the cluster's workers
        (``pipelines.distributed.influence.influence_maximization``); 'auto' does when the job runs on
        a Dask cluster of two or more workers. The seeds are the same either way.
    overwrite : bool
        Replace a seeds CSV written by another influence job (other graph or options); without it such
        a file is refused before anything runs. The job's own earlier result is always replaced.

    Returns
    -------
    Job
        Its result is an ``InfluenceSummary``: seeds, RR estimate and simulated spread, theta, timings.
    """
    options = IMMOptions(
        k=k,
        epsilon=epsilon,
        ell=ell,
        model=model,
        weights=weights,
        rounds=rounds,
        seed=seed,
        max_rr_sets=max_rr_sets,
    )
    n_sim = check_count("n_sim", n_sim, minimum=0)  # before anything runs
    if spread_rtol is not None and not 0.0 < spread_rtol < 1.0:
        raise OptionError(f"spread_rtol must be in (0, 1) or None, got {spread_rtol!r}")
    workdir = Path(workdir or default_workdir())
    read = {"directed": directed, **(read_options or {})}
    load, gtoken = load_stage(source, workdir=workdir, read_options=read)
    token = tokenize("influence", gtoken, options)
    if distributed not in (True, False, "auto"):
        raise OptionError(f"distributed must be True, False or 'auto', got {distributed!r}")
    imm = dask.delayed(_imm, pure=True)(load, options, distributed, dask_key_name=f"influence-imm-{token}")
    mc_token = tokenize(token, int(n_sim), spread_rtol)  # the check's own settings name it and the summary
    mc = dask.delayed(_spread, pure=True)(
        load, imm, options, int(n_sim), spread_rtol, dask_key_name=f"influence-mc-{mc_token}"
    )
    out = str(Path(out).resolve())
    check = functools.partial(check_result_token, out, "influence", token, bool(overwrite))
    check()  # before anything runs: never over an input or another job's seeds
    name = f"graphjobs-influence-{mc_token}"
    result = dask.delayed(_write, pure=True)(load, imm, mc, out, check, token, dask_key_name=name)
    stages = {"load": load, "imm": imm, "spread": mc, "summary": result}
    return Job("influence", result, workdir, stages=stages, out=Path(out), check_out=check)


def _imm(graph: GraphHandle, options: IMMOptions, distributed) -> dict:
    workers = cluster_workers()
    if distributed is True and workers == 0:
        raise OptionError("distributed=True needs a Dask cluster (run with --cluster or --scheduler)")
    if distributed is True or (distributed == "auto" and workers >= 2):
        from distributed import worker_client

        with worker_client() as client:  # frees this task's thread while the workers sample
            res = distributed_imm(graph.get("cpu"), options.k, client, options=options)
    else:
        with in_task("influence-imm") as progress:
            res = operators.influence_maximization(graph.get(), options=options, progress=progress)
    return dict(
        seeds=res.seeds.tolist(),
        rounds=res.seed_rounds.tolist(),
        gains=res.gains.tolist(),
        spread=res.spread,
        theta=res.theta,
        lower_bound=res.lower_bound,
        rr_sets=res.rr_sets,
        rr_size=res.rr_size,
        theta_capped=res.theta_capped,
        seconds=res.seconds,
        device=res.device,
        workers=res.workers,
        memory=res.memory,
    )


def _spread(graph: GraphHandle, imm: dict, options: IMMOptions, n_sim: int, rtol):
    if n_sim <= 0:
        return None
    info: dict = {}
    with in_task("influence-mc") as progress:
        mean = operators.influence_spread(
            graph.get(),
            imm["seeds"],
            model=options.model,
            weights=options.weights,
            n_sim=n_sim,
            seed=options.seed,
            seed_rounds=imm["rounds"],
            rtol=rtol,
            info=info,
            progress=progress,
        )
    return {"mean": mean, "stderr": info["stderr"], "n_sim": info["n_sim"]}


def _write(graph: GraphHandle, imm: dict, spread, out: str, check, token: str) -> InfluenceSummary:
    import pandas as pd

    check()
    columns = (np.arange(1, len(imm["seeds"]) + 1), imm["seeds"], imm["rounds"], imm["gains"])
    table = pd.DataFrame(dict(zip(SEEDS_HEADER.split(","), columns, strict=True)))
    write_csv_result(out, "influence", token, lambda tmp: table.to_csv(tmp, index=False))
    return InfluenceSummary(out=out, n=graph.n, m=graph.m, **imm, mc_spread=spread)
