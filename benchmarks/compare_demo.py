"""Compare two `graphjobs demo` output folders, e.g. one run on 1 worker and one on 2 (or on 2 GPUs):
python -m benchmarks.compare_demo DIR_A DIR_B [--allow-differing 0.002]. Exit status 1 when they differ.

Every job's output must agree: PageRank to an L1 difference of 1e-6, the seeds of influence maximization
as a set, and for the batch jobs (top-k PPR, PPR, SimRank) the same sources, the same vertices kept per
source and values within a relative 1e-5. ``allow_differing`` is the share of a batch job's sources whose
kept vertices may differ (GPU top-k answers, whose atomic float adds may order near-ties either way).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

BATCH_JOBS = ("topk-ppr", "ppr", "simrank")


def compare(a, b, *, allow_differing: float = 0.0) -> list[tuple[bool, str]]:
    """(agrees, what was compared) for each job whose output is in both folders ``a`` and ``b``."""
    a, b = Path(a), Path(b)
    found = []
    if (a / "pagerank.parquet").exists() and (b / "pagerank.parquet").exists():
        pa, pb = (pd.read_parquet(x / "pagerank.parquet").sort_values("vertex") for x in (a, b))
        same = len(pa) == len(pb) and (pa.vertex.to_numpy() == pb.vertex.to_numpy()).all()
        l1 = float(np.abs(pa.pagerank.to_numpy() - pb.pagerank.to_numpy()).sum()) if same else np.inf
        found.append(
            (same and l1 < 1e-6, f"pagerank: {len(pa)} / {len(pb)} vertices, L1 difference {l1:.2e}")
        )
    for job in BATCH_JOBS:
        if (a / job).exists() and (b / job).exists():
            found.append(_batch(job, pd.read_parquet(a / job), pd.read_parquet(b / job), allow_differing))
    if (a / "seeds.csv").exists() and (b / "seeds.csv").exists():
        sa, sb = (set(pd.read_csv(x / "seeds.csv").vertex) for x in (a, b))
        found.append((sa == sb, f"influence: {len(sa)} / {len(sb)} seeds, {len(sa & sb)} shared"))
    return found


def _batch(job: str, da: pd.DataFrame, db: pd.DataFrame, allow_differing: float) -> tuple[bool, str]:
    value = next(c for c in da.columns if c not in ("source", "rank", "vertex"))
    ga, gb = (
        {s: dict(zip(g.vertex, g[value], strict=True)) for s, g in d.groupby("source")} for d in (da, db)
    )
    if set(ga) != set(gb):
        return False, f"{job}: the sources differ ({len(ga)} / {len(gb)}, {len(set(ga) & set(gb))} shared)"
    differ, worst = [], 0.0
    for s, va in ga.items():
        vb = gb[s]
        if set(va) != set(vb):
            differ.append(s)
        for v in set(va) & set(vb):
            worst = max(worst, abs(va[v] - vb[v]) / max(abs(va[v]), 1e-300))
    ok = len(differ) <= allow_differing * len(ga) and worst < 1e-5
    shown = f" (e.g. source {differ[0]}: {sorted(ga[differ[0]])} / {sorted(gb[differ[0]])})" if differ else ""
    return ok, (
        f"{job}: {len(ga)} sources, {len(differ)} with other vertices kept{shown}, "
        f"largest relative difference of a value {worst:.1e}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--allow-differing", type=float, default=0.0, help="share of a batch job's sources")
    args = ap.parse_args(argv)
    found = compare(args.a, args.b, allow_differing=args.allow_differing)
    for ok, what in found:
        print(("ok   " if ok else "FAIL ") + what)
    bad = sum(not ok for ok, _ in found)
    print("RESULT", f"{bad} of {len(found)} jobs differ" if bad else f"all {len(found)} jobs agree")
    return 1 if bad or not found else 0


if __name__ == "__main__":
    sys.exit(main())
