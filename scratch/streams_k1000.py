"""R-MAT 24, k = 1000: batch queries/s by streams (1..6), sources with out-edges and uniform; two passes."""
import sys, time
import numpy as np
import cupy as cp
import graphs
from operators import build_ppr_index, topk_ppr
from graphs._device import to_host

scale = int(sys.argv[1]) if len(sys.argv) > 1 else 24
g = graphs.rmat(scale, seed=0, device="gpu")
t0 = time.perf_counter(); idx = build_ppr_index(g, seed=0); cp.cuda.Device().synchronize()
print(f"index {time.perf_counter() - t0:.2f} s", flush=True)
rng = np.random.default_rng(2)
ok = np.flatnonzero(np.diff(to_host(g.indptr)) > 0)
edges = rng.choice(ok, size=4000, replace=False)
uniform = np.random.default_rng(3).choice(g.n, size=10000, replace=False)
topk_ppr(idx, edges[:64], k=1000, streams=6)  # warm all workspaces, compile
for k in (1000, 300):
    for pas in range(2):
        for s in (4, 2, 3, 5, 6):
            for name, srcs in (("out-edges", edges), ("uniform", uniform)):
                if k == 300 and name == "uniform":
                    continue
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                res = topk_ppr(idx, srcs, k=k, streams=s)
                cp.cuda.Device().synchronize()
                dt = time.perf_counter() - t0
                print(f"k={k} pass {pas} streams {s} {name}: {len(srcs) / dt:.0f} q/s", flush=True)
