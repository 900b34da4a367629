"""Influence maximization by IMM over reverse-reachable samples (gIM on the GPU), and Monte Carlo spread.

IMM (Tang, Shi, Xiao, SIGMOD 2015) in natural logs, with ``log C(n, k)`` from lgamma:
ell' = ell (1 + log 2 / log n), eps' = sqrt(2) eps,
lambda' = (2 + 2 eps'/3) (log C(n,k) + ell' log n + log log2 n) n / eps'^2; for i = 1 .. log2(n) - 1,
x = n / 2^i, grow the samples to lambda'/x, select S_i, and stop with LB = n F(S_i) / (1 + eps') once
n F(S_i) >= (1 + eps') x (LB = 1 if never). alpha = sqrt(ell' log n + log 2),
beta = sqrt(rho (log C(n,k) + ell' log n + log 2)), lambda* = 2 n (rho alpha + beta)^2 / eps^2 and
theta = lambda* / LB, where rho = 1 - 1/e is the greedy's ratio. The final selection uses theta *fresh*
samples (Chen 2018's correction); ``reuse_rr_sets=True`` tops up the estimation samples as IMM did.

Multi-round IM (CR-NAIMM, Sun et al. KDD 2018): a sample is ``rounds`` RR sets of one root, drawn in
independent worlds; the greedy picks (vertex, round) pairs, k per round, to cover samples. The pairs
form a partition matroid, on which the greedy guarantees rho = 1/2, and there are C(n,k)^rounds seed
choices, so log C(n,k) becomes rounds * log C(n,k) and rho becomes 1/2 in the bounds above.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from graphs import CSRGraph
from graphs._device import array_module, free_memory, to_host
from graphs._mix import stream_key
from graphs.errors import OptionError
from operators._checks import check_graph
from operators._gpu.memory import MemoryEstimate, graph_bytes
from operators._progress import report
from operators.influence import cpu as _im_cpu
from operators.influence.kernels import FIRST_MEAN
from operators.influence.model import build_estimate, diffusion_model, model_bytes
from operators.options import IMMOptions

# random streams of one seed: estimation samples, their roots, final samples, their roots
_ESTIMATE, _ESTIMATE_ROOTS, _FINAL, _FINAL_ROOTS = range(4)  # stream 4: operators.influence.spread


@dataclass(frozen=True)
class InfluenceResult:
    """Seeds chosen by IMM with the figures behind them (``seconds``: per phase, wall clock;
    ``estimation``: one dict per round of the estimation phase, its ``x``, ``rr_sets`` drawn so far,
    ``covered`` (n times the fraction its greedy seeds cover) and the seconds of its sampling and its
    greedy; ``memory``: the largest of the sampling phases' estimates, ``operators._gpu.memory``, None
    on a cluster); ``to_frame()`` and ``to_dict()`` give the seeds with their gains."""

    seeds: np.ndarray
    seed_rounds: np.ndarray
    gains: np.ndarray
    spread: float
    theta: int
    lower_bound: float
    rr_sets: int
    rr_size: int
    seconds: dict = field(default_factory=dict)
    model: str = "IC"
    epsilon: float = 0.1
    rounds: int = 1
    theta_capped: bool = False
    device: str = "cpu"
    workers: int = 1
    memory: dict | None = None
    estimation: tuple = ()

    def to_frame(self):
        """The seeds as a pandas DataFrame, in selection order: columns ``rank`` (from 1), ``vertex``
        (original label), ``round`` and ``gain`` (its marginal spread estimate; the gains add up to
        ``spread``), as ``graphjobs influence`` writes its CSV."""
        import pandas as pd

        rank = np.arange(1, len(self.seeds) + 1, dtype=np.int64)
        columns = {"rank": rank, "vertex": self.seeds, "round": self.seed_rounds, "gain": self.gains}
        return pd.DataFrame(columns)

    def to_dict(self) -> dict:
        """``{seed: gain}`` in selection order (with ``rounds > 1``, ``{(seed, round): gain}``, as a seed
        may be picked in several rounds)."""
        gains = np.asarray(self.gains).tolist()
        if self.rounds > 1:
            keys = zip(np.asarray(self.seeds).tolist(), np.asarray(self.seed_rounds).tolist(), strict=True)
            return dict(zip(keys, gains, strict=True))
        return dict(zip(np.asarray(self.seeds).tolist(), gains, strict=True))


def influence_maximization(
    G: CSRGraph,
    k: int | None = None,
    *,
    epsilon: float = IMMOptions.epsilon,
    ell: float = IMMOptions.ell,
    model: str = IMMOptions.model,
    weights=IMMOptions.weights,
    rounds: int = IMMOptions.rounds,
    seed: int = IMMOptions.seed,
    max_rr_sets: int | None = IMMOptions.max_rr_sets,
    reuse_rr_sets: bool = IMMOptions.reuse_rr_sets,
    options: IMMOptions | None = None,
    progress=None,
) -> InfluenceResult:
    """Pick ``k`` seed vertices (per round) that maximize the expected spread, by IMM.

    Parameters
    ----------
    G : CSRGraph, NetworkX graph, SciPy sparse matrix or pandas edge DataFrame
        The last three are converted with their labels first (``graphs.as_graph``).
        On the CPU or the GPU; sampling and selection run where the graph is.
    k : int
        Seeds to pick (in each round); optional only with ``options``.
    epsilon, ell : float
        With probability at least ``1 - n**-ell`` the seeds' spread is at least
        ``(rho - epsilon)`` times the best possible (rho = 1 - 1/e, or 1/2 with ``rounds > 1``).
    model : {'IC', 'LT'}
        Independent cascade or linear threshold.
    weights : {'wc', 'trivalency', 'graph'} or float
        Edge probabilities: ``'wc'`` 1/in_degree(v) for edge (u, v); ``'trivalency'`` one of 0.1,
        0.01, 0.001 per edge, drawn from ``seed``; ``'graph'`` the graph's own weights; a float, the
        same probability everywhere. For LT every vertex's in-weights must sum to at most 1.
    rounds : int
        Multi-round IM (CR-NAIMM): ``k`` seeds in each of ``rounds`` independent diffusions,
        maximizing the expected number of vertices activated in at least one.
    seed : int
        All randomness (RR samples, trivalency weights) comes from this seed; CPU and GPU draw the
        same samples and pick the same seeds.
    max_rr_sets : int, optional
        Cap on the RR samples; when theta exceeds it, ``theta_capped`` is set and the guarantee is
        void.
    reuse_rr_sets : bool
        Reuse the estimation phase's samples in the final selection (the original IMM).
    options : IMMOptions, optional
        ``k`` and every option above in one checked object, used as it is; a keyword that differs from
        it raises ``OptionError``.
    progress : callable, optional
        ``progress(done, total, unit)`` as RR samples are drawn: unit ``"RR sets (estimation)"`` for
        the estimation's rounds (their total grows round by round), then ``"RR sets"`` for the final
        samples (``operators._progress``).

    Returns
    -------
    InfluenceResult
        ``seeds`` (labels, in selection order), ``seed_rounds``, ``gains`` (each seed's marginal
        spread estimate), ``spread`` (n times the covered fraction of the final samples: their
        sum), ``theta``, ``lower_bound``, ``rr_sets`` and ``rr_size`` (the final samples' count and
        total size) and ``seconds`` per phase.

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> res = gj.influence_maximization(G, 1, seed=0)
    >>> res.seeds.tolist(), res.spread
    ([2], 3.0)
    """
    G = check_graph(G)
    o = imm_options(
        options,
        k=k,
        epsilon=epsilon,
        ell=ell,
        model=model,
        weights=weights,
        rounds=rounds,
        seed=seed,
        max_rr_sets=max_rr_sets,
        reuse_rr_sets=reuse_rr_sets,
    )
    t_start = time.perf_counter()
    dm = diffusion_model(G, o.model, o.weights, o.seed)

    def make(key, root):  # the estimation's samples, then the final ones (counted from 0 again)
        unit = "RR sets" if key == stream_key(o.seed, _FINAL) else "RR sets (estimation)"
        return _Pool(dm, o.rounds, key, root, progress, unit)

    return run_imm(G, o, make, t_start=t_start)


def imm_options(options: IMMOptions | None, *, k, **keywords) -> IMMOptions:
    """The options IMM runs with: ``options`` (``k`` None or the same), or one made from the keywords."""
    if options is None and k is None:
        raise TypeError("influence_maximization needs k (seeds per round) or options=IMMOptions(k=...)")
    if options is not None and k is None:
        k = options.k
    return IMMOptions.resolve(options, k=k, **keywords)


def run_imm(
    G: CSRGraph, o: IMMOptions, make_pool, *, t_start: float, workers: int = 1, device: str | None = None
) -> InfluenceResult:
    """IMM's phases over RR-sample pools made by ``make_pool(key, root_key)`` (each with ``grow(total)``,
    ``select(k) -> (picks, gains)``, ``count``, ``size`` and ``expected``): the driver shared by one
    device (``influence_maximization``) and the workers of a cluster (``pipelines.distributed``).
    ``t_start`` is when the call began."""
    if o.k > G.n:  # more seeds than vertices: refused, not clamped
        raise OptionError(f"k={o.k:,} seeds is more than the graph's {G.n:,} vertices; ask for k <= {G.n:,}")
    k, eps, ell, rounds, max_rr_sets = o.k, o.epsilon, o.ell, o.rounds, o.max_rr_sets
    kind, seed, reuse_rr_sets = o.model, o.seed, o.reuse_rr_sets
    n = G.n
    local = device is None
    device = G.device if local else device
    t_setup = time.perf_counter()  # with workers: the graph shipped to them, their shards made
    b = imm_bounds(n, k, eps, ell, rounds)
    cap = max_rr_sets or np.iinfo(np.int64).max
    pool = make_pool(stream_key(seed, _ESTIMATE), stream_key(seed, _ESTIMATE_ROOTS))
    lower, capped, steps, memory = 1.0, False, [], None

    def check(count: int, mean: float, drawn: int) -> dict | None:
        """Each sampling phase's estimate is checked before it draws; the largest is reported."""
        if not local:
            return None
        record = _check_memory(G, count, mean, rounds, kind, drawn)
        return record if memory is None or record["estimate_bytes"] > memory["estimate_bytes"] else memory

    for i in range(1, max(2, math.ceil(math.log2(n)))):
        x = n / 2**i
        want = math.ceil(b["lambda_prime"] / x)
        capped |= want > cap
        memory = check(max(min(want, cap), pool.count), pool.expected or FIRST_MEAN * rounds, pool.count)
        t0 = time.perf_counter()
        pool.grow(min(want, cap))
        t1 = time.perf_counter()
        _, gains = pool.select(k)
        covered = n * gains.sum() / pool.count
        steps.append(
            dict(
                x=x,
                rr_sets=pool.count,
                covered=float(covered),
                sample_s=t1 - t0,
                greedy_s=time.perf_counter() - t1,
            )
        )
        if covered >= (1 + b["eps_prime"]) * x:
            lower = covered / (1 + b["eps_prime"])
            break
    t_estimate = time.perf_counter()
    theta = math.ceil(b["lambda_star"] / lower)
    capped |= theta > cap
    final_count = min(theta, cap)
    if reuse_rr_sets:  # reused samples stay held: the estimation's last pool may outnumber theta
        memory = check(max(final_count, pool.count), pool.expected, pool.count)
    else:  # the estimation's samples go (their memory freed) before the final ones are checked and drawn
        mean = pool.expected
        pool = make_pool(stream_key(seed, _FINAL), stream_key(seed, _FINAL_ROOTS))
        pool.expected = mean
        memory = check(final_count, mean, 0)
    pool.grow(final_count)
    t_sample = time.perf_counter()
    picks, gains = pool.select(k)
    t_end = time.perf_counter()
    labels = G.labels_of(picks % n)
    return InfluenceResult(
        seeds=labels,
        seed_rounds=(picks // n).astype(np.int64),
        gains=n * gains / pool.count,
        spread=float(n * gains.sum() / pool.count),
        theta=int(theta),
        lower_bound=float(lower),
        rr_sets=int(pool.count),
        rr_size=int(pool.size),
        seconds={
            "setup": t_setup - t_start,
            "estimation": t_estimate - t_setup,
            "sampling": t_sample - t_estimate,
            "selection": t_end - t_sample,
            "total": t_end - t_start,
        },
        model=kind,
        epsilon=eps,
        rounds=rounds,
        theta_capped=bool(capped),
        device=device,
        workers=workers,
        memory=memory,
        estimation=tuple(steps),
    )


def imm_bounds(n: int, k: int, eps: float, ell: float, rounds: int = 1) -> dict:
    """IMM's constants for n vertices and k seeds per round (see the module docstring)."""
    log_n = math.log(max(n, 2))
    ell = ell * (1 + math.log(2) / log_n)
    eps_p = math.sqrt(2) * eps
    log_c = rounds * (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1))
    rho = 1 - 1 / math.e if rounds == 1 else 0.5
    log_log = math.log(max(math.log2(max(n, 2)), 1.0))
    lam_p = (2 + 2 * eps_p / 3) * (log_c + ell * log_n + log_log) * n / eps_p**2
    a = math.sqrt(ell * log_n + math.log(2))
    b = math.sqrt(rho * (log_c + ell * log_n + math.log(2)))
    lam_s = 2 * n * (rho * a + b) ** 2 / eps**2
    return dict(ell=ell, eps_prime=eps_p, log_cnk=log_c, rho=rho, lambda_prime=lam_p, lambda_star=lam_s)


class _Pool:
    """RR samples j = 0 .. count-1 of one random stream, on the model's device; ``progress(count, total,
    unit)`` as they are drawn (on the CPU also within a call's passes; ``operators._progress``)."""

    def __init__(self, dm, rounds: int, key: int, root_key: int, progress=None, unit: str = "RR sets"):
        self.dm, self.rounds, self.key, self.root_key = dm, rounds, key, root_key
        self.progress, self.unit = progress, unit
        self.gpu = array_module(dm.rev.indptr) is not np
        self.parts: list = []
        self.offsets: list = []
        self.count = self.size = 0
        self.expected = None  # mean sample size, once known (sizes the sampler's buffers)

    def grow(self, total: int) -> None:
        if total <= self.count:
            return
        backend = _gpu_backend() if self.gpu else _im_cpu
        lt = self.dm.kind == "LT"
        args = (self.dm.rev, lt, self.key, self.root_key, self.rounds, self.count, total - self.count)
        report(self.progress, self.count, total, self.unit)
        if self.gpu or self.progress is None:
            members, offsets = backend.sample(*args, self.expected)
        else:
            each = lambda done, _: report(self.progress, self.count + done, total, self.unit)  # noqa: E731
            members, offsets = backend.sample(*args, self.expected, progress=each)
        self.parts.append(members)
        self.offsets.append(offsets[1:] + self.size)
        self.count, self.size = total, self.size + int(offsets[-1])
        self.expected = self.size / self.count
        report(self.progress, self.count, total, self.unit)

    def select(self, k: int):
        xp = array_module(self.parts[0])
        if len(self.parts) > 1:
            self.parts = [xp.concatenate(self.parts)]
            self.offsets = [xp.concatenate(self.offsets)]
        offsets = xp.concatenate([xp.zeros(1, dtype=np.int64), self.offsets[0]])
        backend = _gpu_backend() if self.gpu else _im_cpu
        picks, gains = backend.greedy(self.parts[0], offsets, self.dm.n, k, self.rounds)
        return to_host(picks), to_host(gains)


def _gpu_backend():
    from operators.influence import gpu as _im_gpu

    return _im_gpu


def _check_memory(G: CSRGraph, count: int, mean: float, rounds: int, kind: str, drawn: int = 0) -> dict:
    """A sampling phase's memory estimate for ``count`` samples held, ``drawn`` of them drawn already,
    checked before it draws (``MemoryEstimate.check``; the graph, the model and the drawn samples, one
    copy each, are allocated already):
    the graph, the diffusion model (``model.model_bytes``), the samples (their elements kept, gathered
    and indexed for the greedy: 3 copies on the GPU, 1.5 on the CPU, and 16 bytes of offsets each) and,
    on the GPU, the sampler's buffers (at most ``gpu._BUDGET`` and a quarter of the free memory) and the
    pool of its pass for samples that outgrow their queue (``gpu.REDO_SHARE``). The
    record states the larger of it and the model's build (``model.build_estimate``, checked before the
    build): the call's peak is one or the other."""
    item = 4 if rounds * G.n < 2**31 else 8
    samples = int(count * (mean * item * (3.0 if G.device == "gpu" else 1.5) + 16))
    kept = min(samples, int(drawn * (mean * item + 16)))  # the drawn samples' elements and offsets
    held = ("graph", "model", "samples drawn")
    parts = [
        ("graph", graph_bytes(G.n, G.m, weighted=G.weighted)),
        ("model", model_bytes(G.n, G.m, kind)),
        ("samples drawn", kept),
        ("samples", samples - kept),
    ]
    if G.device == "gpu":
        free, backend = free_memory("gpu"), _gpu_backend()
        parts.append(("sampler", min(backend._BUDGET, free // 4)))
        parts.append(("redo pool", max(free // backend.REDO_SHARE, 4 * rounds * G.n)))
    record = MemoryEstimate(
        f"{count:,} RR samples (about {mean:.1f} elements each)", G.device, tuple(parts), held
    ).check(
        "raise epsilon, set max_rr_sets (voids the guarantee), or sample on several workers "
        "with pipelines.influence_job"
    )
    build = build_estimate(G, kind)
    if build.bytes > record["estimate_bytes"]:
        record.update(estimate_bytes=build.bytes, parts=dict(build.parts))
    return record
