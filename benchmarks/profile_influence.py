"""Where IMM's time goes on the GPU: every sampling and selection call of one run, synchronised and timed.

python -m benchmarks.profile_influence [GRAPH.txt.gz | ba:N:R] [IC|LT] [EPS] [REPEATS]
"""

from __future__ import annotations

import sys
import time

import cupy as cp

import graphs
from operators import influence, influence_maximization


def _timed(name, fn):
    def wrapper(self, *a):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = fn(self, *a)
        cp.cuda.Device().synchronize()
        ms = 1e3 * (time.perf_counter() - t0)
        print(f"{name:7s} {a} count={self.count:,} size={self.size:,} {ms:8.2f} ms")
        return out

    return wrapper


def main() -> None:
    src, model, eps, repeats = [*sys.argv[1:], None, None, None, None][:4]
    if src.startswith("ba:"):
        _, n, r = src.split(":")
        g = graphs.barabasi_albert(int(n), int(r), seed=0, device="gpu")
    else:
        g = graphs.read_edgelist(src).to("gpu")
    influence_maximization(g, 50, epsilon=0.5, seed=9)
    influence._Pool.grow = _timed("sample", influence._Pool.grow)
    influence._Pool.select = _timed("select", influence._Pool.select)
    for _ in range(int(repeats or 1)):
        res = influence_maximization(g, 50, epsilon=float(eps or 0.05), model=model or "IC", seed=1)
        print({k: round(v * 1e3, 1) for k, v in res.seconds.items()}, res.theta, res.rr_size)


if __name__ == "__main__":
    main()
