"""`graphjobs demo`: every job of graphjobs on one generated R-MAT graph, on a local cluster.

The jobs share the graph's load stage and the work directory, so the graph is generated once; the
top-k job's PageRank and index stages are built there too (its headline pipeline: load -> CSR ->
PageRank -> IRW index -> query batch). Sizes keep the whole demo to seconds on a laptop (scale 16)
and on one GPU (scale 20): batches of random sources, small k. The PPR jobs draw their sources among
the vertices with out-edges and SimRank among those with in-edges (half of an R-MAT graph's vertices
have no edge, and their answers are trivial).
"""

from __future__ import annotations

from pathlib import Path

from graphs.errors import OptionError

from .influence import influence_job
from .pagerank import pagerank_job
from .ppr import ppr_job
from .simrank import simrank_job
from .sources import RandomSources
from .topk_ppr import topk_ppr_job

DEMO_JOBS = ("pagerank", "topk-ppr", "ppr", "influence", "simrank")

# per job: (sources or seeds on the CPU, on the GPU), k, and what it says before it runs
_SIZES = {
    "pagerank": (None, None),
    "topk-ppr": (1_000, 10_000),
    "ppr": (100, 1_000),
    "influence": (10, 50),
    "simrank": (10, 20),
}
_TITLES = {
    "pagerank": "global PageRank (load -> CSR -> PageRank -> Parquet)",
    "topk-ppr": "top-{k} personalized PageRank, kPAR (load -> CSR -> PageRank -> IRW index -> {n:,} queries)",
    "ppr": "personalized PageRank vectors, push/pull hybrid ({n:,} sources, top {k} kept)",
    "influence": "influence maximization, IMM under IC ({n} seeds)",
    "simrank": "single-source SimRank, ClipSim ({n:,} sources, top {k} kept)",
}


def demo_jobs(names, *, scale: int, device: str, out, workdir=None) -> list[tuple[str, str, object]]:
    """(name, title, Job) for each job of ``names`` (a subset of ``DEMO_JOBS``), in that order.

    The graph is ``rmat:scale=<scale>,seed=0``; outputs go under the folder ``out``.
    """
    unknown = [name for name in names if name not in DEMO_JOBS]
    if unknown:
        raise OptionError(f"--jobs: unknown job {unknown[0]!r}; expected some of {', '.join(DEMO_JOBS)}")
    spec, out, k = f"rmat:scale={scale},seed=0", Path(out), 10
    gpu = device == "gpu"
    jobs = []
    for name in (name for name in DEMO_JOBS if name in names):
        n = _SIZES[name][1 if gpu else 0]
        n = None if n is None else max(1, min(n, 2**scale // 16))  # small --scale: a 16th of the vertices
        batch = dict(workdir=workdir, overwrite=True)  # replaces an earlier demo's outputs (another scale)
        if name == "pagerank":
            job = pagerank_job(spec, out=str(out / "pagerank.parquet"), workdir=workdir, overwrite=True)
        elif name == "topk-ppr":
            job = topk_ppr_job(spec, RandomSources(n, among="out"), k=k, out=str(out / name), **batch)
        elif name == "ppr":
            job = ppr_job(spec, RandomSources(n, among="out"), topk=k, out=str(out / name), **batch)
        elif name == "influence":
            job = influence_job(spec, n, out=str(out / "seeds.csv"), n_sim=1_000, workdir=workdir)
        else:  # ClipSim's cost grows as 1 / epsilon^2: 0.5 s a source at 1e-2 on a laptop core, scale 16
            eps = 1e-3 if gpu else 1e-2
            job = simrank_job(
                spec, RandomSources(n, among="in"), k=k, epsilon=eps, out=str(out / name), **batch
            )
        jobs.append((name, _TITLES[name].format(n=n, k=k), job))
    return jobs
