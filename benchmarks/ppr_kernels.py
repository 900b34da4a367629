"""The GPU PPR solver's kernel time per method: for each graph and tol, the median solve-kernel ms
(CUDA events) of push, pull and the hybrid over the same random sources, float64, with iterations,
pull iterations, ms per iteration, the first source's reserve sum (to compare versions) and the
hybrid's models; ``--forced-pull`` adds the hybrid under weights that make it pull every time, whose
difference from pull alone is the cost of the hybrid's statistics; ``--trace`` prints, for the
hybrid's last source, which of its decisions the frontier bound settled without statistics and the
frontier sizes. Run it from two trees in turn on one machine to compare versions of the kernels (from
each tree's own folder: ``python -m`` puts the working directory first on ``sys.path``, ahead of
PYTHONPATH, so pointing PYTHONPATH at another tree's operators does not load them):

    python -m benchmarks.ppr_kernels new rmat:22,soc-Epinions1 1e-6,1e-9 --sources 5
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.profile_ppr import gpu_graph
from graphs._device import to_host
from operators.ppr.cost import HYBRID, PULL, PUSH, CostModel, cost_model, fit_grid
from operators.ppr.push_gpu import solver


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tag", help="a label printed at the start of each line (e.g. the commit)")
    ap.add_argument("graphs", help="comma-separated SNAP names or rmat:SCALE")
    ap.add_argument("tols", help="comma-separated residue thresholds")
    ap.add_argument("--sources", type=int, default=5)
    ap.add_argument("--forced-pull", action="store_true", help="also the hybrid forced to pull")
    ap.add_argument("--trace", action="store_true", help="the hybrid's bounded decisions and frontiers")
    args = ap.parse_args(argv)
    c = cost_model("gpu")
    print(args.tag, "weights", c.l1, c.l2, c.l3, flush=True)
    for name in args.graphs.split(","):
        g = gpu_graph(name)
        deg = np.diff(to_host(g.indptr))
        rng = np.random.default_rng(1)
        ids = [int(v) for v in rng.choice(np.flatnonzero(deg > 0), args.sources, replace=False)]
        for tol in (float(t) for t in args.tols.split(",")):
            row, hybrid_models, hybrid_trace = [], "", None
            runs = [("push", PUSH, c), ("pull", PULL, c), ("hybrid", HYBRID, c)]
            if args.forced_pull:  # Psi = 1000 Phi_rdw >= 0: pull every time, statistics counted
                runs.append(("hybrid-pull", HYBRID, CostModel(1000.0, 0.0, 0.0, blocks=c.blocks)))
            for method, mode, model in runs:
                grid = fit_grid(model, m=g.m, rows=1, tol=tol, mode=mode)
                run = solver(g, mode, 0.8, tol, np.float64, grid)
                run([ids[0]], 10**6)  # compile, plan
                ms, its, pulls, first = [], [], [], None
                for v in ids:
                    p, it, models, _ = run([v], 10**6)
                    ms.append(run.last_kernel_ms)
                    its.append(it)
                    pulls.append(models.count("L"))
                    if method == "hybrid":
                        hybrid_models, hybrid_trace = models, run.last_trace
                    first = float(p.sum()) if first is None else first
                k, it = float(np.median(ms)), float(np.mean(its))
                row.append(
                    f"{method} {k:8.3f} ms it {it:5.1f} L {np.mean(pulls):5.1f} per-it {k / it:6.3f} "
                    f"sum {first:.12f}"
                )
            print(f"{args.tag} {name} {tol:g}: " + " | ".join(row), flush=True)
            print(f"{args.tag}   hybrid models {hybrid_models}", flush=True)
            if args.trace:  # trace columns: model, Phi_rdw, Phi_sqw, frontier size, bounded
                bounded = "".join(str(int(b)) for b in hybrid_trace[:, 4])
                print(f"{args.tag}   hybrid bounded {bounded} (row 0: the host's first decision)", flush=True)
                print(f"{args.tag}   hybrid frontiers {[int(f) for f in hybrid_trace[:, 3]]}", flush=True)


if __name__ == "__main__":
    main()
