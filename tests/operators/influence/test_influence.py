"""Influence maximization: RR samples, greedy cover and IMM (the models and Monte Carlo spread:
``test_spread``; samples over Dask workers: ``test_influence_mg``).

Oracles: the identity n * Pr[v in RR] = E[I({v})] checked against forward simulation, brute-force
maximum coverage, a slow CELF greedy on simulations, and the CPU path for the GPU one (both draw the
same live-edge worlds).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import graphs
import operators
from graphs._device import to_host
from graphs._mix import stream_key
from graphs.errors import OptionError
from operators import influence_maximization, influence_spread
from operators.influence import cpu as _im_cpu
from operators.influence import imm_bounds
from operators.influence.cpu import SKIP_LIVE
from operators.influence.model import diffusion_model
from tests.conftest import DEVICES, snap
from tests.operators.influence.test_spread import Z


def greedy_reference(sets, k, n, rounds=1):
    """Plain greedy max coverage over Python sets of elements t*n + v; ties to the smaller element."""
    covered, picks, gains, left = set(), [], [], [k] * rounds
    for _ in range(k * rounds):
        gain = {e: 0 for e in range(n * rounds) if left[e // n] and e not in picks}
        for j, s in enumerate(sets):
            if j not in covered:
                for e in s:
                    if e in gain:
                        gain[e] += 1
        best = min(gain, key=lambda e: (-gain[e], e))
        picks.append(best)
        gains.append(gain[best])
        left[best // n] -= 1
        covered |= {j for j, s in enumerate(sets) if best in s}
    return picks, gains


@pytest.mark.parametrize("model", ["IC", "LT"])
def test_rr_inclusion_frequency_equals_single_vertex_spread(model):
    g = graphs.barabasi_albert(80, 2, seed=2, device="cpu")
    dm = diffusion_model(g, model, "wc", 0)
    count = 400_000
    members, offsets = _im_cpu.sample(dm.rev, model == "LT", stream_key(1), stream_key(2), 1, 0, count)
    assert offsets[-1] == members.size and np.all(np.diff(offsets) >= 1)
    p_hat = np.bincount(members, minlength=g.n) / count
    for v in (0, 1, 5, 40, 79):
        info = {}
        mc = influence_spread(g, [v], model=model, n_sim=40_000, seed=v, info=info)
        sd = math.hypot(g.n * math.sqrt(p_hat[v] * (1 - p_hat[v]) / count), info["stderr"])
        assert abs(g.n * p_hat[v] - mc) < Z * sd, (v, g.n * p_hat[v], mc)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("q", [0.02, 0.5])  # d * q = 4: geometric skips; 100 > SKIP_LIVE: edge by edge
def test_live_in_edges_of_a_row_are_independent_with_its_probability(device, q):
    """Sinks 0..R-1 each with in-edges from all d leaves R..R+d-1 (leaves have none): a sample rooted at
    a sink holds it and its live leaves, so the leaf count is Binomial(d, q) and each leaf is in a
    fraction q of those samples, whichever way the row's live edges are drawn."""
    sinks, d, count = 300, 200, 60_000
    src = np.tile(np.arange(sinks, sinks + d), sinks)
    dst = np.repeat(np.arange(sinks), d)
    g = graphs.from_edges(src, dst, n=sinks + d, renumber=False).to(device)
    dm = diffusion_model(g, "IC", q, 0)
    assert dm.rev.equal_rows and (d * q <= SKIP_LIVE) == (q == 0.02)
    backend = _im_cpu if device == "cpu" else pytest.importorskip("operators.influence.gpu")
    members, offsets = (to_host(a) for a in backend.sample(dm.rev, False, 7, 8, 1, 0, count))
    roots = members[offsets[:-1]]  # a sample's root is queued first
    rooted = np.flatnonzero(roots < sinks)
    leaves = np.diff(offsets)[rooted] - 1
    sets = [members[offsets[j] + 1 : offsets[j + 1]] for j in rooted]
    assert all(s.min() >= sinks and np.unique(s).size == s.size for s in sets if s.size)
    n = rooted.size
    assert abs(leaves.mean() - d * q) < Z * math.sqrt(d * q * (1 - q) / n)
    assert abs(leaves.var() / (d * q * (1 - q)) - 1) < Z * math.sqrt(2 / n) * 1.5
    freq = np.bincount(np.concatenate(sets) - sinks, minlength=d)
    chi2 = float(((freq - n * q) ** 2 / (n * q * (1 - q))).sum())
    assert abs(chi2 - d) < Z * math.sqrt(2 * d), chi2


def test_samples_do_not_depend_on_chunking():
    g = graphs.rmat(9, seed=1, device="cpu")
    dm = diffusion_model(g, "IC", 0.2, 0)
    a = _im_cpu.sample(dm.rev, False, 11, 12, 2, 100, 3000, chunks=16)
    b = _im_cpu.sample(dm.rev, False, 11, 12, 2, 100, 3000, chunks=3)
    c = _im_cpu.sample(dm.rev, False, 11, 12, 2, 0, 3100, chunks=5)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert np.array_equal(a[0], c[0][c[1][100] :])


def _random_sets(rng, n, count, rounds=1):
    sets = []
    for _ in range(count):
        size = rng.integers(1, 5)
        sets.append({int(t * n + v) for t in range(rounds) for v in rng.choice(n, size, replace=False)})
    members = np.concatenate([np.array(sorted(s), dtype=np.int32) for s in sets])
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    return sets, members, offsets


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rounds", [1, 2])
def test_greedy_matches_reference_and_brute_force(device, rounds):
    rng = np.random.default_rng(7)
    n, k = 10, 3
    sets, members, offsets = _random_sets(rng, n, 60, rounds)
    if device == "gpu":
        from operators.influence import gpu as _im_gpu

        picks, gains = map(to_host, _im_gpu.greedy(*(to_dev(a) for a in (members, offsets)), n, k, rounds))
    else:
        picks, gains = _im_cpu.greedy(members, offsets, n, k, rounds)
    ref_picks, ref_gains = greedy_reference(sets, k, n, rounds)
    assert list(picks) == ref_picks and list(gains) == ref_gains
    if rounds == 1:
        best = max(sum(1 for s in sets if s & set(c)) for c in itertools.combinations(range(n), k))
        assert best >= sum(gains) >= (1 - 1 / math.e) * best


def to_dev(a):
    import cupy

    return cupy.asarray(a)


@pytest.mark.gpu
@pytest.mark.parametrize("rounds", [1, 3])
def test_gpu_indexed_greedy_equals_the_cpu_greedy_on_a_skewed_pool(rounds):
    """Hubs held by most samples, one sample of every element, many ties: same index, picks and gains."""
    from operators.influence import gpu as _im_gpu

    rng = np.random.default_rng(11)
    n, k, count = 2_000, 40, 30_000
    sizes = np.minimum(rng.geometric(0.15, count), n // 2)
    sets = []
    for j, size in enumerate(sizes):
        base = rng.zipf(1.6, size) % n if j != 17 else np.arange(n)
        sets.append(np.unique(base + n * rng.integers(0, rounds, base.size)))
    members = np.concatenate(sets).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum([s.size for s in sets])]).astype(np.int64)
    n_elem = n * rounds
    owners, holders = _im_cpu.cover_index(members, offsets, n_elem)
    index = _im_gpu.cover_index(to_dev(members), to_dev(offsets), n_elem)
    g_owners, g_holders, g_counts = map(to_host, index)
    assert np.array_equal(g_owners, owners)
    assert np.array_equal(g_counts, np.bincount(members, minlength=n_elem))
    for e in rng.integers(0, n_elem, 200):  # each element's holders, in any order
        span = slice(owners[e], owners[e + 1])
        assert np.array_equal(np.sort(g_holders[span]), holders[span])
    picks, gains = _im_cpu.greedy(members, offsets, n, k, rounds)
    g_picks, g_gains = map(to_host, _im_gpu.greedy(to_dev(members), to_dev(offsets), n, k, rounds))
    assert list(g_picks) == list(picks) and list(g_gains) == list(gains)
    assert gains.sum() <= count and np.all(np.bincount(picks // n, minlength=rounds) == k)


def test_imm_bounds_follow_the_formulas():
    n, k, eps, ell = 10_000, 20, 0.1, 1.0
    b = imm_bounds(n, k, eps, ell)
    ell2 = ell * (1 + math.log(2) / math.log(n))
    logc = math.log(math.comb(n, k))
    assert b["log_cnk"] == pytest.approx(logc, rel=1e-12)
    ep = math.sqrt(2) * eps
    lam_p = (2 + 2 * ep / 3) * (logc + ell2 * math.log(n) + math.log(math.log2(n))) * n / ep**2
    assert b["lambda_prime"] == pytest.approx(lam_p, rel=1e-12)
    a, bb = (
        math.sqrt(ell2 * math.log(n) + math.log(2)),
        math.sqrt((1 - 1 / math.e) * (logc + ell2 * math.log(n) + math.log(2))),
    )
    assert b["lambda_star"] == pytest.approx(2 * n * ((1 - 1 / math.e) * a + bb) ** 2 / eps**2, rel=1e-12)
    assert imm_bounds(n, k, eps, ell, rounds=3)["log_cnk"] == pytest.approx(3 * logc)


def test_the_estimation_rounds_halve_x_and_stop_where_the_coverage_first_clears_it():
    """IMM's estimation phase, round i: x = n / 2^i, ceil(lambda' / x) samples in all, stop at the first
    round whose greedy covers (1 + eps') x; the lower bound is that coverage / (1 + eps')."""
    g = graphs.rmat(12, seed=4, device="cpu")
    res = influence_maximization(g, 10, epsilon=0.2, model="IC", weights="wc", seed=5)
    b = imm_bounds(g.n, 10, 0.2, 1.0)
    steps = res.estimation
    assert [s["x"] for s in steps] == [g.n / 2**i for i in range(1, len(steps) + 1)]
    assert [s["rr_sets"] for s in steps] == [math.ceil(b["lambda_prime"] / s["x"]) for s in steps]
    cleared = [s["covered"] >= (1 + b["eps_prime"]) * s["x"] for s in steps]
    assert cleared == [False] * (len(steps) - 1) + [True]
    assert res.lower_bound == pytest.approx(steps[-1]["covered"] / (1 + b["eps_prime"]))
    assert res.theta == math.ceil(b["lambda_star"] / res.lower_bound)
    assert all(s["sample_s"] >= 0 and s["greedy_s"] >= 0 for s in steps)


def test_every_sampling_phase_states_and_checks_its_memory_before_it_draws(monkeypatch):
    """Each estimation round and the final phase check the memory of the samples they will hold before
    they draw (with ``reuse_rr_sets`` the final phase keeps the estimation's samples, which can outnumber
    theta); the result states the largest estimate. A limit between two rounds' estimates stops IMM at
    the later round, before it draws, in one line."""
    import importlib

    im_mod = importlib.import_module("operators.influence")
    real, seen = im_mod._check_memory, []

    def spy(G, count, mean, rounds, kind, drawn=0):
        record = real(G, count, mean, rounds, kind, drawn)
        asked = int(count * (mean * 4 * 1.5 + 16)) - int(drawn * (mean * 4 + 16))  # on the CPU: 1.5 copies
        seen.append((count, drawn, record["estimate_bytes"], asked))
        return record

    monkeypatch.setattr(im_mod, "_check_memory", spy)
    g = graphs.rmat(12, seed=4, device="cpu")
    run = lambda **kw: influence_maximization(g, 20, epsilon=0.3, model="IC", weights="wc", seed=5, **kw)  # noqa: E731
    res = run()
    counts = [c for c, *_ in seen]
    assert counts[:-1] == [s["rr_sets"] for s in res.estimation]
    assert counts[-1] == res.theta == res.rr_sets and seen[-1][1] == 0  # new samples, none kept
    assert [d for _, d, *_ in seen[:-1]] == [0, *counts[:-2]]  # each round holds the rounds before
    assert res.memory["estimate_bytes"] == max(b for _, _, b, _ in seen)
    parts = res.memory["parts"]
    assert parts["samples drawn"] + parts["samples"] >= res.rr_size * 4 * 1.5  # 1.5 copies of 4-byte elements
    seen.clear()
    res = run(reuse_rr_sets=True)
    last = res.estimation[-1]["rr_sets"]
    assert res.theta < last == res.rr_sets == seen[-1][0] == seen[-1][1]  # the kept samples, no new ones
    rounds = seen[:-1]
    unheld = [u for *_, u in rounds]  # what each round's check asks of the free memory (on the CPU)
    assert len(rounds) >= 3 and unheld[2] > max(unheld[:2])  # the first round guesses its mean
    limit = (max(unheld[:2]) + unheld[2]) / 2 / 0.9  # the first two rounds fit, the third does not
    seen.clear()
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", str(int(limit)))
    third = res.estimation[2]["rr_sets"]
    with pytest.raises(operators.errors.InsufficientMemoryError, match=f"{third:,} RR samples"):
        run()
    assert [c for c, *_ in seen] == [s["rr_sets"] for s in res.estimation[:2]]  # the third raised


def celf(g, k, model, n_sim):
    """Lazy greedy (CELF) on Monte Carlo spreads: the slow reference seed set."""
    ids = to_host(g.ids) if g.ids is not None else np.arange(g.n)
    est = lambda s: influence_spread(g, s, model=model, n_sim=n_sim, seed=9)  # noqa: E731
    heap = sorted(((-est([v]), int(v)) for v in ids), key=lambda t: t[0])
    seeds, base = [], 0.0
    while len(seeds) < k:
        _, v = heap.pop(0)
        fresh = est([*seeds, v]) - base
        if not heap or fresh >= -heap[0][0]:
            seeds.append(v)
            base += fresh
        else:
            heap.append((-fresh, v))
            heap.sort(key=lambda t: t[0])
    return seeds


@pytest.mark.parametrize("model", ["IC", "LT"])
def test_imm_seeds_spread_as_far_as_celf(model):
    g = graphs.barabasi_albert(300, 2, seed=5, device="cpu")
    res = influence_maximization(g, 5, epsilon=0.1, model=model, seed=1)
    assert len(set(res.seeds.tolist())) == 5 and np.all(res.seed_rounds == 0)
    ref = celf(g, 5, model, 2000)
    ours = influence_spread(g, res.seeds, model=model, n_sim=50_000, seed=2)
    theirs = influence_spread(g, ref, model=model, n_sim=50_000, seed=2)
    assert ours >= 0.98 * theirs
    # the RR estimate of the seeds' spread agrees with simulation within epsilon
    assert abs(res.spread - ours) <= 0.1 * ours
    assert res.theta >= res.rr_sets and res.rr_sets == res.theta and not res.theta_capped
    assert res.lower_bound <= ours * 1.01


@pytest.mark.parametrize("model", ["IC", "LT"])
def test_imm_on_snap_graph_against_celf(model):
    g = snap("wiki-Vote")
    res = influence_maximization(g, 5, epsilon=0.1, model=model, seed=0)
    ref = celf(g, 5, model, 300)
    ours = influence_spread(g, res.seeds, model=model, n_sim=20_000, seed=2)
    theirs = influence_spread(g, ref, model=model, n_sim=20_000, seed=2)
    assert ours >= 0.98 * theirs


def test_multi_round_picks_k_per_round_and_estimates_the_union():
    g = graphs.barabasi_albert(400, 2, seed=8, device="cpu")
    res = influence_maximization(g, 4, epsilon=0.1, rounds=3, seed=2)
    assert np.array_equal(np.bincount(res.seed_rounds, minlength=3), [4, 4, 4])
    mc = influence_spread(g, res.seeds, seed_rounds=res.seed_rounds, n_sim=20_000, seed=3)
    assert abs(res.spread - mc) <= 0.1 * mc
    single = influence_maximization(g, 4, epsilon=0.1, seed=2)
    assert mc > influence_spread(g, single.seeds, n_sim=20_000, seed=3)


def test_more_seeds_than_vertices_is_refused_and_all_of_them_is_answered():
    g = graphs.barabasi_albert(60, 2, seed=8, device="cpu")
    with pytest.raises(OptionError, match="k=61 seeds is more than the graph's 60 vertices; ask for k <= 60"):
        influence_maximization(g, 61, epsilon=0.3, seed=2)
    every = influence_maximization(g, 60, epsilon=0.3, seed=2)
    assert sorted(every.seeds.tolist()) == list(range(60))  # all vertices seeded: the spread is n
    assert every.spread == pytest.approx(60)


def test_reproducible_options_and_reuse():
    g = graphs.barabasi_albert(500, 3, seed=1, device="cpu")
    a = influence_maximization(g, 3, epsilon=0.3, seed=4)
    b = influence_maximization(g, 3, epsilon=0.3, seed=4)
    assert np.array_equal(a.seeds, b.seeds) and a.spread == b.spread and a.theta == b.theta
    r = influence_maximization(g, 3, epsilon=0.3, seed=4, reuse_rr_sets=True)
    assert r.rr_sets == r.theta
    capped = influence_maximization(g, 3, epsilon=0.3, seed=4, max_rr_sets=100)
    assert capped.theta_capped and capped.rr_sets == 100
    assert set(a.seconds) == {"setup", "estimation", "sampling", "selection", "total"}
    assert isinstance(operators.InfluenceResult, type)


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["IC", "LT"])
@pytest.mark.parametrize("rounds", [1, 2])
def test_gpu_draws_the_cpu_samples_and_seeds(model, rounds):
    from operators.influence import gpu as _im_gpu

    g = graphs.rmat(11, seed=2, device="cpu")
    dm, dmg = diffusion_model(g, model, "wc", 0), diffusion_model(g.to("gpu"), model, "wc", 0)
    cm, co = _im_cpu.sample(dm.rev, model == "LT", 5, 6, rounds, 10, 20_000)
    gm, go = (to_host(a) for a in _im_gpu.sample(dmg.rev, model == "LT", 5, 6, rounds, 10, 20_000))
    assert np.array_equal(co, go)
    for j in range(0, 20_000, 997):
        assert np.array_equal(np.sort(cm[co[j] : co[j + 1]]), np.sort(gm[go[j] : go[j + 1]]))
    assert np.array_equal(np.bincount(cm), np.bincount(gm))
    a = influence_maximization(g, 10, epsilon=0.2, model=model, rounds=rounds, seed=3)
    b = influence_maximization(g.to("gpu"), 10, epsilon=0.2, model=model, rounds=rounds, seed=3)
    assert np.array_equal(a.seeds, b.seeds) and np.array_equal(a.seed_rounds, b.seed_rounds)
    assert a.spread == b.spread and a.rr_size == b.rr_size and b.device == "gpu"
    sa = influence_spread(g, a.seeds, model=model, n_sim=4000, seed=1)
    sb = influence_spread(g.to("gpu"), a.seeds, model=model, n_sim=4000, seed=1)
    assert sa == sb  # the same simulated worlds


@pytest.mark.gpu
def test_gpu_sampler_handles_samples_larger_than_its_scratch():
    from operators.influence import gpu as _im_gpu

    g = graphs.barabasi_albert(30_000, 4, seed=3, device="cpu")  # p = 0.5: RR sets of thousands
    dm, dmg = diffusion_model(g, "IC", 0.5, 0), diffusion_model(g.to("gpu"), "IC", 0.5, 0)
    cm, co = _im_cpu.sample(dm.rev, False, 1, 2, 1, 0, 300)
    gm, go = (to_host(a) for a in _im_gpu.sample(dmg.rev, False, 1, 2, 1, 0, 300))
    assert np.diff(co).max() > _im_gpu._SCRATCH
    assert np.array_equal(co, go) and np.array_equal(np.bincount(cm), np.bincount(gm))


def test_the_skips_logarithms_are_accurate():
    """The series that both paths use for the skips' logarithms against the C library's."""
    from operators.influence.cpu import log_one_minus, log_unit

    rng = np.random.default_rng(1)
    us = np.concatenate([rng.random(20_000), rng.random(2_000) ** 40, [1.0, 0.5, 2.0**-53, 1 - 2.0**-53]])
    for u in us:
        assert log_unit(u) == pytest.approx(math.log(u), rel=2e-15, abs=1e-300)
    qs = np.concatenate([rng.random(10_000), 10 ** rng.uniform(-12, 0, 10_000), [0.25, 0.25 - 2.0**-40]])
    for q in qs[(qs > 0) & (qs < 1)]:
        assert log_one_minus(q) == pytest.approx(math.log1p(-q), rel=2e-15)


@pytest.mark.gpu
def test_the_gpu_computes_the_skips_logarithms_to_the_same_bit():
    """The CUDA copies of log_unit and log_one_minus give the CPU's doubles exactly (so both paths put
    every skip on the same edge)."""
    import cupy as cp

    from graphs._kernel import Kernel
    from operators.influence.cpu import log_one_minus, log_unit
    from operators.influence.kernels import IM_DEFINES, IM_DEVICE

    source = (
        IM_DEVICE
        + r"""
extern "C" __global__ void gj_t_logs(const double* x, long long n, double* lu, double* l1) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { lu[i] = gj_im_log_unit(x[i]); l1[i] = gj_im_log_one_minus(x[i]); }
}
"""
    )
    kernel = Kernel(source, ("gj_t_logs",), defines=IM_DEFINES, label="test-skip-logs").get("gj_t_logs")
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.random(200_000), 10 ** rng.uniform(-12, 0, 100_000), [0.25, 0.5, 2.0**-53]])
    x = x[(x > 0) & (x < 1)]
    lu, l1 = cp.empty(x.size), cp.empty(x.size)
    kernel(((x.size + 255) // 256,), (256,), (cp.asarray(x), np.int64(x.size), lu, l1))
    assert np.array_equal(cp.asnumpy(lu), np.array([log_unit(v) for v in x]))
    assert np.array_equal(cp.asnumpy(l1), np.array([log_one_minus(v) for v in x]))
