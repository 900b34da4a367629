"""Expected spread of a seed set by forward Monte Carlo simulation of IC or LT, many cascades in parallel."""

from __future__ import annotations

import math
import time

import numpy as np

from graphs import CSRGraph
from graphs._device import array_module, to_host
from graphs._mix import stream_key
from graphs.errors import OptionError
from operators._checks import check_count, check_graph
from operators._progress import report
from operators.influence import cpu as _im_cpu
from operators.influence.model import check_model, diffusion_model

_SIMULATE = 4  # the seed's random stream of simulations (operators.influence numbers the others)
FIRST_BATCH = 100  # simulations drawn before ``rtol`` is first checked (then the count doubles)


def influence_spread(
    G: CSRGraph,
    seeds,
    *,
    model: str = "IC",
    weights="wc",
    n_sim: int = 10000,
    seed: int = 0,
    seed_rounds=None,
    rtol: float | None = None,
    info: dict | None = None,
    progress=None,
) -> float:
    """Expected number of vertices a seed set activates, by ``n_sim`` forward simulations (with
    ``rtol``, by as few of them as reach that precision).

    Parameters
    ----------
    G : CSRGraph, NetworkX graph, SciPy sparse matrix or pandas edge DataFrame
        The last three are converted with their labels first (``graphs.as_graph``).
        On the CPU or the GPU; the simulations run where the graph is.
    seeds : sequence of labels
        The seed vertices (original labels; repeats are harmless).
    model, weights
        The diffusion, as in ``influence_maximization``.
    n_sim : int
        Independent cascades simulated (with ``rtol``: at most).
    seed : int
        Seed of the simulations (and of trivalency weights).
    seed_rounds : sequence of int, optional
        Round of each seed for multi-round IM: the rounds run in independent worlds and a vertex
        counts once if it is active in any of them. Default: one round.
    rtol : float in (0, 1), optional
        Stop once the mean's standard error is at most ``rtol`` times the mean: FIRST_BATCH
        simulations, then as many again until it is or ``n_sim`` are done. Simulation s is the same
        world whenever it is drawn, so the first N simulations of any call agree.
    info : dict, optional
        Filled with ``std`` (of one cascade's size), ``stderr`` (of the mean), ``n_sim`` (simulations
        run) and ``seconds``.
    progress : callable, optional
        ``progress(done, total, "simulations")`` after each batch (``operators._progress``; with it the
        simulations run in batches, FIRST_BATCH first and then as many again: the same answer).

    Returns
    -------
    float
        The mean number of vertices active (in at least one round) at the end of a cascade.

    Examples
    --------
    >>> import graphjobs as gj
    >>> G = gj.from_edges([0, 0, 1, 2, 3], [1, 2, 2, 0, 2])
    >>> gj.influence_spread(G, [2], n_sim=1000, seed=1)  # 2 -> 0 -> 1 always, under weighted cascade
    3.0
    """
    G = check_graph(G)
    n_sim = check_count("n_sim", n_sim)
    if rtol is not None and not 0.0 < rtol < 1.0:
        raise OptionError(f"rtol must be a relative standard error in (0, 1) or None, got {rtol!r}")
    kind = check_model(model)
    ids = G.internal_ids(np.atleast_1d(np.asarray(seeds, dtype=object if G.has_labels else None)))
    ids = to_host(ids).astype(np.int64)
    rounds_of = np.zeros(ids.size, dtype=np.int64) if seed_rounds is None else np.asarray(seed_rounds)
    if rounds_of.shape != ids.shape or (rounds_of.size and (rounds_of.min() < 0)):
        raise OptionError(f"seed_rounds must hold one round >= 0 per seed ({ids.size}), got {seed_rounds!r}")
    rounds = int(rounds_of.max()) + 1 if rounds_of.size else 1
    t0 = time.perf_counter()
    dm = diffusion_model(G, kind, weights, seed)
    key = stream_key(seed, _SIMULATE)
    if array_module(G.indptr) is np:
        backend = _im_cpu
    else:
        from operators.influence import gpu as backend
    parts, done = [], 0
    batch = n_sim if rtol is None and progress is None else min(n_sim, FIRST_BATCH)
    while True:
        got = backend.cascades(dm.fwd, kind == "LT", key, ids, rounds_of, rounds, batch, first=done)
        parts.append(to_host(got).astype(np.float64))
        done += batch
        sizes = np.concatenate(parts) if len(parts) > 1 else parts[0]
        std = float(sizes.std(ddof=1)) if done > 1 else 0.0
        mean = float(sizes.mean())
        precise = rtol is not None and std / math.sqrt(done) <= rtol * mean
        report(progress, done, done if precise else n_sim, "simulations")
        if done >= n_sim or precise:
            break
        batch = min(done, n_sim - done)
    if info is not None:
        info.update(std=std, stderr=std / math.sqrt(done), n_sim=done, seconds=time.perf_counter() - t0)
    return mean
