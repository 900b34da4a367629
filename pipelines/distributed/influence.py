"""IMM with its RR samples spread over a Dask cluster's workers: ``influence_maximization(G, k, client)``.

Each worker holds a ``Shard`` (a Dask actor) with the samples of some index ranges of a random stream:
sample ``j`` depends only on ``(seed, j)``, so a split draws exactly the samples one device would.
The greedy keeps a coverage count per element on every shard; each step the client sums the shards'
counts, picks the largest (ties to the smaller element, per-round limits as in the one-device greedy),
and every shard retires it and takes down the counts of the samples it covers. Seeds, gains and spread
therefore equal the single-device result.
"""

from __future__ import annotations

import time

import numpy as np

from graphs import CSRGraph
from graphs._device import array_module, import_cupy, to_host
from operators._checks import check_graph
from operators.influence import InfluenceResult, imm_options, run_imm
from operators.influence import cpu as _im_cpu
from operators.influence.model import diffusion_model
from operators.options import IMMOptions


def influence_maximization(
    G: CSRGraph,
    k: int,
    client,
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
) -> InfluenceResult:
    """``operators.influence_maximization`` with the RR samples spread over the workers of ``client``.

    Each worker gets a copy of the graph on its own device; every greedy step sums the workers'
    coverage counts (through NCCL between GPU workers). The options, the guarantee and the result are
    those of ``operators.influence_maximization``: the same seeds as on one device for the same
    ``seed``. ``InfluenceResult.workers`` counts the workers and ``device`` is 'gpu' when all are GPUs.
    ``k`` may be None when ``options`` (an ``IMMOptions``) holds it.
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
    actors, devices, addresses = shards(client, G, o.model, o.weights, o.seed, o.rounds)
    device = "gpu" if set(devices) == {"gpu"} else "cpu"
    # GPU shards: each greedy runs on the workers, its counts summed by NCCL (communicators kept)
    clique = (client, addresses, f"imm-{actors[0].key}") if device == "gpu" else None
    make = lambda key, root: ShardedPool(actors, G.n, o.rounds, key, root, clique)  # noqa: E731
    try:
        return run_imm(G, o, make, t_start=t_start, workers=len(actors), device=device)
    finally:
        if clique is not None:
            from cluster.comms import close_clique

            close_clique(client, clique[2])


class Shard:
    """RR samples of index ranges of one stream on a worker (its graph on ``device``); a Dask actor."""

    def __init__(self, G, kind: str, weights, seed: int, rounds: int, device: str):
        self.G = G.to(device)
        self.dm = diffusion_model(self.G, kind, weights, seed)
        self.rounds, self.n = rounds, self.G.n
        self.gpu = device == "gpu"
        self.reset(0, 0)

    def _backend(self):
        if self.gpu:
            from operators.influence import gpu as _im_gpu

            return _im_gpu
        return _im_cpu

    def reset(self, key: int, root_key: int) -> None:
        self.key, self.root_key = key, root_key
        self.members, self.offsets, self.state = [], [], None

    def grow(self, j0: int, count: int, expected) -> int:
        """Draw samples ``j0 .. j0+count-1``; returns their total size."""
        if count <= 0:
            return 0
        members, offsets = self._backend().sample(
            self.dm.rev, self.dm.kind == "LT", self.key, self.root_key, self.rounds, j0, count, expected
        )
        base = self.offsets[-1][-1] if self.offsets else 0
        self.members.append(members)
        self.offsets.append(offsets[1:] + base)
        self.state = None
        return int(offsets[-1])

    def counts(self) -> np.ndarray:
        """Start a greedy: every element's number of samples here (int32, host)."""
        return to_host(self.start()).astype(np.int32)

    def start(self):
        """Start a greedy: every element's number of samples here (on the shard's device)."""
        xp = import_cupy() if self.gpu else np
        members = xp.concatenate(self.members) if self.members else xp.zeros(0, dtype=np.int32)
        offsets = xp.concatenate([xp.zeros(1, dtype=np.int64), *self.offsets])
        self.members, self.offsets = [members], [offsets[1:]]
        n_elem = self.n * self.rounds
        if self.gpu:
            *index, counts = self._backend().cover_index(members, offsets, n_elem)
        else:
            counts = np.bincount(members, minlength=n_elem).astype(np.int64)
            index = _im_cpu.cover_index(members, offsets, n_elem)
        covered = xp.zeros(offsets.size - 1, dtype=np.uint8 if self.gpu else np.bool_)
        self.state = (members, offsets, counts, covered, index, counts.copy())
        return counts

    def cover_here(self, best: int):
        """Retire ``best``; the counts left, on the shard's device."""
        members, offsets, counts, covered, index, _ = self.state
        self._backend().cover(members, offsets, *index, covered, counts, int(best))
        return counts

    def cover(self, best: int) -> tuple[np.ndarray, np.ndarray]:
        """Retire ``best``; returns the elements whose counts fell and by how much (host int32 arrays)."""
        members, offsets, counts, covered, index, before = self.state
        self._backend().cover(members, offsets, *index, covered, counts, int(best))
        xp = import_cupy() if self.gpu else np
        changed = xp.flatnonzero(counts != before)
        drop = before[changed] - counts[changed]
        before[changed] = counts[changed]
        return to_host(changed).astype(np.int32), to_host(drop).astype(np.int32)


class ShardedPool:
    """The client's view of a stream of samples spread over ``actors``; the interface of ``_Pool``."""

    def __init__(self, actors, n: int, rounds: int, key: int, root_key: int, clique=None):
        self.actors, self.n, self.rounds, self.clique = actors, n, rounds, clique
        for f in [a.reset(key, root_key) for a in actors]:
            f.result()
        self.count = self.size = 0
        self.expected = None

    def grow(self, total: int) -> None:
        if total <= self.count:
            return
        cuts = np.linspace(self.count, total, len(self.actors) + 1).astype(np.int64)
        futures = [
            a.grow(int(lo), int(hi - lo), self.expected)
            for a, lo, hi in zip(self.actors, cuts[:-1], cuts[1:], strict=True)
        ]
        self.size += sum(f.result() for f in futures)
        self.count = total
        self.expected = self.size / self.count

    def select(self, k: int):
        if self.clique is not None:  # GPU shards: the whole greedy on the workers, counts summed by NCCL
            from cluster.comms import run_spmd

            args = [(a.key, k, self.n, self.rounds) for a in self.actors]
            client, workers, name = self.clique
            picks, gains = run_spmd(
                client, _greedy_rank, args, workers=workers, name="imm-greedy", clique=name
            )[0]
            return picks, gains
        n, rounds = self.n, self.rounds
        counts = _total([a.counts() for a in self.actors])
        out = -(2**62)  # retired elements and rounds with k picks: never the maximum again
        left = np.full(rounds, k)
        picks, gains = [], []
        for _ in range(k * rounds):
            best = int(np.argmax(counts))  # ties to the smaller element, as on one device
            picks.append(best)
            gains.append(int(counts[best]))
            counts[best] = out
            left[best // n] -= 1
            if left[best // n] == 0:
                counts[best // n * n : (best // n + 1) * n] = out
            for f in [a.cover(best) for a in self.actors]:  # each shard sends only what changed
                changed, drop = f.result()
                counts[changed] -= drop
        return np.array(picks, dtype=np.int64), np.array(gains, dtype=np.int64)


def _greedy_rank(comm, key, k: int, n: int, rounds: int):
    """One rank of the GPU greedy: its shard's counts all-reduced every step; every rank picks the same."""
    import cupy as cp
    from distributed import get_worker

    shard = get_worker().state.actors[key]
    total = shard.start().copy()
    comm.allreduce(total)
    out = -(2**30)
    left = [k] * rounds
    picks, gains = [], []
    gone = []
    for _ in range(k * rounds):
        best = int(cp.argmax(total))  # ties to the smaller element, as on one device
        picks.append(best)
        gains.append(int(total[best]))
        gone.append(best)
        r = best // n
        left[r] -= 1
        total[...] = shard.cover_here(best)
        comm.allreduce(total)
        total[cp.asarray(gone)] = out
        for t in range(rounds):
            if left[t] == 0:
                total[t * n : (t + 1) * n] = out
    return np.array(picks, dtype=np.int64), np.array(gains, dtype=np.int64)


def _total(futures) -> np.ndarray:
    return np.sum([f.result() for f in futures], axis=0, dtype=np.int64)


def shards(client, G, kind: str, weights, seed: int, rounds: int) -> tuple[list, list, list]:
    """One ``Shard`` actor per worker of ``client`` (each with a copy of ``G`` on the worker's device),
    the workers' devices and addresses."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    devices = client.run(_device, workers=workers)
    host = G.to("cpu") if array_module(G.indptr) is not np else G
    g = client.scatter(host, broadcast=True, hash=True)
    futures = [
        client.submit(Shard, g, kind, weights, seed, rounds, devices[w], workers=[w], actor=True)
        for w in workers
    ]
    return [f.result() for f in futures], [devices[w] for w in workers], workers


def _device():
    from cluster.worker import worker_device

    return worker_device()
