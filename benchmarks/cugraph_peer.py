"""cuGraph (pylibcugraph) as a peer, measured in the same run as ours wherever it is installed.

pylibcugraph's PageRank stops when an iteration's L1 change is below ``epsilon`` (its
``diff_sum < epsilon``), the rule of our end-to-end rows; an ``epsilon`` of 0 means its default 1e-5,
so per-iteration timings pass 1e-30 and a fixed iteration count instead. Personalized PageRank is
the same power method restarting at the source; a walk at a dangling vertex returns to the source
there too, so its vector is our PPR. Values are float32 (the graph has no float64 weights).
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np

import graphs

NAME = "cugraph 26.10 (pylibcugraph)"


def available() -> bool:
    """pylibcugraph imports here (its libraries load, a GPU is present)."""
    if importlib.util.find_spec("pylibcugraph") is None:
        return False
    try:
        import pylibcugraph  # noqa: F401
    except Exception as exc:  # any failure to load means no peer in this run
        print(f"cuGraph peer not measured: pylibcugraph does not load ({exc})", flush=True)
        return False
    return True


def _sync():
    import cupy as cp

    cp.cuda.Device().synchronize()


class Peer:
    """One graph handed to pylibcugraph (renumbered and stored transposed, as cuGraph recommends for
    PageRank); the build time is kept."""

    def __init__(self, g):
        _sync()
        t0 = time.perf_counter()
        self.graph, self.handle = graphs.to_pylibcugraph(g, store_transposed=True)
        _sync()
        self.build_s = time.perf_counter() - t0
        self.n = g.n

    def _dense(self, out):
        import cupy as cp

        vertices, values = out[0], out[1]
        x = cp.zeros(self.n, dtype=values.dtype)
        x[vertices] = values
        return x

    def pagerank(self, *, alpha=0.85, epsilon=1e-6, max_iter=1000, strict=True):
        import pylibcugraph as plc

        out = plc.pagerank(
            self.handle,
            self.graph,
            None,
            None,
            None,
            None,
            alpha,
            epsilon,
            max_iter,
            False,
            fail_on_nonconvergence=strict,
        )
        return self._dense(out)

    def ppr(self, source: int, *, alpha=0.8, epsilon=1e-6, max_iter=200):
        """The PPR vector of ``source`` (internal id). Not converging in ``max_iter`` (float32 may stall
        above a tiny ``epsilon``) is not an error here: callers measure the vector's error."""
        import cupy as cp
        import pylibcugraph as plc

        verts, vals = cp.asarray([source], dtype=cp.int32), cp.ones(1, dtype=cp.float32)
        out = plc.personalized_pagerank(
            self.handle,
            self.graph,
            None,
            None,
            None,
            None,
            verts,
            vals,
            alpha,
            epsilon,
            max_iter,
            False,
            fail_on_nonconvergence=False,
        )
        return self._dense(out)

    def iteration_seconds(self, repeats: int = 3) -> float:
        """Seconds per PageRank iteration, from runs of 10 and 50 iterations (set-up cancels)."""

        def run(k):
            times = []
            for _ in range(repeats):
                _sync()
                t0 = time.perf_counter()
                self.pagerank(epsilon=1e-30, max_iter=k, strict=False)
                _sync()
                times.append(time.perf_counter() - t0)
            return float(np.median(times))

        run(2)  # warm-up
        return (run(50) - run(10)) / 40
