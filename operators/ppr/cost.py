"""The cost model that picks push or pull before each iteration of the hybrid PPR solver.

Kernels assign work to ``blocks`` persistent blocks of ``warps`` warps of ``lanes`` threads. Slot
``q`` (a position in the push frontier, or a vertex id in the pull sweep) belongs to block
``(q // warps) % blocks`` and to warp ``q % warps`` of it. With that assignment (Wang et al., Eq. 1-5):

* ``Phi_rdw = max_i { sum_{v in B_i} ceil(d+_v / (w b)) + max_j sum_{v in W_j} ceil(d+_v / w) }``
  over the active vertices in frontier order (random atomic writes of push);
* ``Phi_rdr``: the same over every vertex with in-degrees (random reads of pull; fixed per graph);
* ``Phi_sqw``: like ``Phi_rdr`` plus ``delta_v (1 + log2(w b))`` per block and ``delta_v (1 + log2 w)``
  per warp, ``delta_v = 1`` when v has an active in-neighbour (the reductions of pull);
* ``Psi = l1 Phi_rdw - l2 Phi_rdr - l3 Phi_sqw``: push runs next when ``Psi < 0``.

``delta`` is known only once messages arrive, so the solvers use the vertices that received one in
the iteration that just ran; the active set itself (``Phi_rdw``) is the one of the next iteration.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LANES = 32
WARPS = 8
BLOCKS = 1056  # 8 blocks of 256 threads on each of 132 SMs; also the CPU's virtual layout
DEFAULT_WEIGHTS = (2.3, 1.1, 1.0)
SMALL_WORK = 2**22  # edges that an iteration may read, below which the solvers run half the grid (fit_grid)
CALIBRATION = 4  # version of the micro-benchmarks (``_ppr_calibrate``): older cached weights are re-measured
PUSH, PULL, HYBRID = 0, 1, 2  # solver modes (the hybrid picks PUSH or PULL per iteration)


@dataclass(frozen=True)
class CostModel:
    """Weights of the three access patterns and the block layout that the statistics assume."""

    l1: float = DEFAULT_WEIGHTS[0]
    l2: float = DEFAULT_WEIGHTS[1]
    l3: float = DEFAULT_WEIGHTS[2]
    blocks: int = BLOCKS
    warps: int = WARPS
    lanes: int = LANES

    @property
    def block_reduce(self) -> float:
        return 1.0 + math.log2(self.lanes * self.warps)

    @property
    def warp_reduce(self) -> float:
        return 1.0 + math.log2(self.lanes)

    def psi(self, rdw: float, rdr: float, sqw: float) -> float:
        return self.l1 * rdw - self.l2 * rdr - self.l3 * sqw

    def choose(self, rdw: float, rdr: float, sqw: float) -> int:
        return PUSH if self.psi(rdw, rdr, sqw) < 0 else PULL


def slot_of(q, model: CostModel):
    """(block, global warp) of slot ``q`` (vectorised)."""
    q = np.asarray(q, dtype=np.int64)
    block = (q // model.warps) % model.blocks
    return block, block * model.warps + q % model.warps


def block_max(blk: np.ndarray, wrp: np.ndarray, warps: int) -> float:
    """``max_i (blk[i] + max_j wrp[i, j])`` for per-block and per-warp sums."""
    return float((blk + wrp.reshape(-1, warps).max(axis=1)).max())


def pull_static(in_deg: np.ndarray, model: CostModel) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-block and per-warp in-degree terms of every vertex, and Phi_rdr (fixed per graph)."""
    d = np.asarray(in_deg, dtype=np.int64)
    block, warp = slot_of(np.arange(d.size), model)
    w, wb = model.lanes, model.lanes * model.warps
    blk = np.bincount(block, weights=-(-d // wb), minlength=model.blocks).astype(np.float64)
    wrp = np.bincount(warp, weights=-(-d // w), minlength=model.blocks * model.warps).astype(np.float64)
    return blk, wrp, block_max(blk, wrp, model.warps)


def frontier_rdw(out_deg, model: CostModel) -> float:
    """Phi_rdw of a frontier holding vertices of these out-degrees at positions 0, 1, ... (the
    hybrid's first decision: the sources). Position q is slot q, so this is ``pull_static``'s sum
    with out-degrees; up to one vertex per warp, block i holds positions [i * warps, (i + 1) * warps)
    and the sum has a closed form (no NumPy work for a query's few sources)."""
    w, wb = model.lanes, model.lanes * model.warps
    if len(out_deg) <= model.warps:  # one block (a query's sources): integers, no array work
        d = [int(x) for x in out_deg]
        return float(sum(-(-x // wb) for x in d) + max((-(-x // w) for x in d), default=0))
    d = np.asarray(out_deg, dtype=np.int64)
    if d.size > model.warps * model.blocks:
        return pull_static(d, model)[2]
    slots = np.zeros(-(-d.size // model.warps) * model.warps, dtype=np.int64)
    slots[: d.size] = d
    slots = slots.reshape(-1, model.warps)
    return float(((-(-slots // wb)).sum(axis=1) + (-(-slots // w)).max(axis=1)).max(initial=0))


@functools.lru_cache(maxsize=1024)
def light_degree(model: CostModel, rdr: float, dmax: int) -> int:
    """The largest out-degree D <= ``dmax`` with ``l1 * (b ceil(D / (w b)) + ceil(D / w)) < (l2 + l3) rdr``
    (-1 if none): while every vertex of a frontier of at most ``b * blocks`` has out-degree at most D,
    Phi_rdw is below that bound and Phi_sqw >= Phi_rdr, so Psi < 0 (push) without the statistics."""
    w, b = model.lanes, model.warps

    def bound(d: int) -> float:
        return model.l1 * (b * -(-d // (w * b)) + -(-d // w))

    lo, hi = -1, int(dmax)  # bound() does not decrease: the last D below the threshold
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if bound(mid) < (model.l2 + model.l3) * rdr else (lo, mid - 1)
    return lo


def fit_grid(model: CostModel, *, m: int, rows: int, tol: float, mode: int) -> CostModel:
    """The layout of a solve by default: half the blocks when no iteration can read many edges.

    A row's residues sum to at most 1 and a vertex is active while r(v) > tol * max(d_out, 1), so a
    push iteration of ``rows`` sources reads fewer than ``rows / tol`` out-edges; a pull sweep reads
    ``rows * m`` in-edges. Below ``SMALL_WORK`` edges the grid-wide barriers, and the hybrid's
    statistics (one counter per block and warp), cost more than the idle warps of a half grid
    (benchmarks/RESULTS.md, single-source PPR section).
    The CPU's virtual layout follows the same rule, so both make the same decisions.
    """
    work = rows * (m if mode == PULL else min(m, 1.0 / tol))
    if work >= SMALL_WORK or model.blocks % 8:
        return model
    return dataclasses.replace(model, blocks=model.blocks // 2)


def phi_reference(frontier, out_deg, in_deg, received, model: CostModel) -> tuple[float, float, float]:
    """Slow and obvious (Python loops, for tests): Phi_rdw, Phi_rdr, Phi_sqw of one iteration.

    ``frontier`` lists the active vertices in the order the push kernel takes them; ``received`` is
    the set of vertices with an active in-neighbour.
    """
    w, b, nb = model.lanes, model.warps, model.blocks
    received = set(int(v) for v in received)

    def phi(slots, cost_block, cost_warp):
        blocks: dict[int, float] = {}
        warps: dict[tuple[int, int], float] = {}
        for q, v in slots:
            i, j = (q // b) % nb, q % b
            blocks[i] = blocks.get(i, 0.0) + cost_block(v)
            warps[i, j] = warps.get((i, j), 0.0) + cost_warp(v)
        return max(
            (blocks[i] + max((c for (bi, _), c in warps.items() if bi == i), default=0.0) for i in blocks),
            default=0.0,
        )

    active = list(enumerate(int(v) for v in frontier))
    every = [(v, v) for v in range(len(in_deg))]
    rdw = phi(active, lambda v: math.ceil(out_deg[v] / (w * b)), lambda v: math.ceil(out_deg[v] / w))
    rdr = phi(every, lambda v: math.ceil(in_deg[v] / (w * b)), lambda v: math.ceil(in_deg[v] / w))
    sqw = phi(
        every,
        lambda v: math.ceil(in_deg[v] / (w * b)) + (v in received) * model.block_reduce,
        lambda v: math.ceil(in_deg[v] / w) + (v in received) * model.warp_reduce,
    )
    return rdw, rdr, sqw


def _cache_file(name: str) -> Path:
    root = os.environ.get("GRAPHJOBS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "graphjobs"
    )
    safe = "".join(c if c.isalnum() else "-" for c in name).strip("-")
    return Path(root) / f"ppr-cost-v{CALIBRATION}-{safe}.json"


_LOADED: dict = {}  # (device id, cache settings) -> CostModel, read once per process


def cost_model(device: str, *, refresh: bool = False) -> CostModel:
    """The cost model of ``device``: on a GPU, weights measured once per GPU model and cached on disk.

    On the CPU the paper's default weights 2.3 : 1.1 : 1 are used. The cache file is
    ``$GRAPHJOBS_CACHE`` (or ``~/.cache/graphjobs``) ``/ppr-cost-v<CALIBRATION>-<GPU name>.json``.
    """
    if device != "gpu":
        return CostModel()
    import cupy as cp

    device_id = cp.cuda.Device().id
    cache_root = os.environ.get("GRAPHJOBS_CACHE"), os.environ.get("XDG_CACHE_HOME")
    if (device_id, cache_root) in _LOADED and not refresh:  # a query per source: no GPU, disk or path work
        return _LOADED[device_id, cache_root]
    name, sms = _gpu_identity(device_id)
    blocks = sms * (2048 // (LANES * WARPS))
    path = _cache_file(name)
    saved = None if refresh else _read_weights(path)
    if saved is not None:
        model = CostModel(*saved, blocks=blocks)
    else:
        from operators.ppr.calibrate import measure_weights

        l1, l2, l3 = measure_weights(CostModel(blocks=blocks))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            tmp.write_text(json.dumps({"gpu": name, "l1": l1, "l2": l2, "l3": l3}))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        model = CostModel(l1, l2, l3, blocks=blocks)
    _LOADED[device_id, cache_root] = model
    return model


def _read_weights(path) -> tuple[float, float, float] | None:
    """The weights cached in ``path``; None, to measure them again, when there is no such file or it does
    not hold three positive finite numbers (a cache is rebuilt, never trusted when damaged)."""
    try:
        saved = json.loads(path.read_text())
        weights = tuple(float(saved[key]) for key in ("l1", "l2", "l3"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as e:
        warnings.warn(
            f"{path}: not a PPR cost cache ({e}); measuring the weights again", RuntimeWarning, stacklevel=3
        )
        return None
    if not all(math.isfinite(w) and w > 0 for w in weights):
        warnings.warn(
            f"{path}: weights {weights} are not positive numbers; measuring them again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return weights


@functools.cache
def _gpu_identity(device_id: int) -> tuple[str, int]:
    """(name, SM count) of a GPU; the properties call takes about a millisecond."""
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return name, int(props["multiProcessorCount"])
