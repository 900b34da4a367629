"""The scalar options of every operator, as frozen dataclasses: each default is stated once, here.

An options object validates and normalises its values when it is made (``__post_init__``, raising
``OptionError``, a ``ValueError``, for a bad value), so whatever holds one holds checked values. Jobs
make one when they are built, pass it to the operator (``options=``) and tokenize it into their Dask
keys (``__dask_tokenize__``); the operators take the same settings as keywords, whose defaults are
read from these classes, and make the object from them. The CLI reads its defaults and help here.

Vocabulary: ``alpha`` is the probability of following an edge, ``tol`` a tolerance, ``max_iter`` an
iteration limit, ``seed`` the seed of the random streams, ``k`` a count of answers, ``epsilon`` an
error target. Vectors over the vertices, sources and graphs stay arguments of the operators.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np

from graphs.errors import OptionError
from operators._checks import check_choice, check_count, check_positive, check_probability

PAGERANK_METHODS = ("auto", "pull", "push", "binned")
PPR_METHODS = ("auto", "powerpush", "hybrid", "push", "pull", "power", "montecarlo")
# float32 residues and reserves round each update at 2**-24 relative: over the hundred-odd iterations of
# a solve that rounding allowance (operators.ppr.epochs.rounding) nears 1e-5, so bounds below this
# cannot be certified
FLOAT32_MIN_TOL = 1e-4


def _help(default=dataclasses.MISSING, text: str = ""):
    return field(default=default, metadata={"help": text})


def _same(a, b) -> bool:
    try:
        return a is b or bool(a == b)
    except (TypeError, ValueError):
        return False


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _seed(value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise OptionError(f"seed must be an integer, got {value!r}")
    return int(value)


def _optional(check, name: str, value, **kw):
    return None if value is None else check(name, value, **kw)


class _Options:
    """What every options class shares: normalising, tokenizing, ``replace`` and ``resolve``."""

    def _set(self, **values) -> None:
        for name, value in values.items():  # normalised values of a frozen instance, once, when it is made
            object.__setattr__(self, name, value)

    def __dask_tokenize__(self):
        values = (getattr(self, f.name) for f in dataclasses.fields(self))
        return (type(self).__name__, *(str(v) if isinstance(v, np.dtype) else v for v in values))

    def replace(self, **changes):
        """A copy with ``changes``, validated as a new object is."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def help(cls, name: str) -> str:
        """The help text of the field ``name``."""
        return cls.__dataclass_fields__[name].metadata.get("help", "")

    @classmethod
    def resolve(cls, options, **keywords):
        """The options an operator runs with: ``options`` as it is when given (a keyword that differs
        from both its default and ``options`` raises ``OptionError``), otherwise one made from
        ``keywords``."""
        if options is None:
            return cls(**keywords)
        if not isinstance(options, cls):
            raise TypeError(f"options must be a {cls.__name__}, got {type(options).__name__}")
        for name, value in keywords.items():
            default = cls.__dataclass_fields__[name].default
            have = getattr(options, name)
            if _same(value, default) or _same(value, have):
                continue
            if _same(getattr(options.replace(**{name: value}), name), have):  # equal once normalised
                continue
            raise OptionError(f"{name}={value!r} conflicts with options.{name}={have!r}: give one of them")
        return options


@dataclass(frozen=True)
class PageRankOptions(_Options):
    """Scalar options of ``operators.pagerank`` (see there)."""

    alpha: float = _help(0.85, "probability of following an edge")
    max_iter: int = _help(100, "iterations allowed before a ConvergenceError")
    tol: float = _help(1e-6, "stop when the L1 change of an iteration is below n * tol")
    method: str = _help("auto", "auto, pull, push or binned")

    def __post_init__(self):
        self._set(
            alpha=check_probability("alpha", self.alpha),
            max_iter=check_count("max_iter", self.max_iter),
            tol=check_positive("tol", self.tol),
            method=check_choice("method", self.method, PAGERANK_METHODS),
        )


@dataclass(frozen=True)
class PPROptions(_Options):
    """Scalar options of ``operators.ppr`` (see there)."""

    alpha: float = _help(0.8, "probability of following an edge")
    tol: float = _help(1e-6, "bound on each row's L1 error against exact PPR")
    method: str = _help("auto", "auto, powerpush, hybrid, push, pull, power or montecarlo")
    max_iter: int | None = _help(None, "iterations allowed (default: none for push and pull)")
    dtype: object = _help(np.float64, "result type: float64 or float32")
    topk: int | None = _help(None, "entries kept per source")
    seed: int = _help(0, "seed of the Monte Carlo walks")
    block: int | None = _help(None, "sources solved together")
    r_max: float | None = _help(None, "the paper's residue threshold per out-edge, instead of tol")

    def __post_init__(self):
        dtype = np.dtype(self.dtype)
        if dtype not in (np.float32, np.float64):
            raise OptionError(f"dtype must be float32 or float64, got {dtype}")
        tol = check_positive("tol", self.tol)
        method = check_choice("method", self.method, PPR_METHODS)
        r_max = _optional(check_positive, "r_max", self.r_max)
        if r_max is not None and method in ("power", "montecarlo"):
            raise OptionError(
                f"r_max is a threshold of powerpush, push, pull and hybrid, not of method={method!r}"
            )
        if dtype == np.float32 and r_max is None and method != "montecarlo" and tol < FLOAT32_MIN_TOL:
            raise OptionError(
                f"float32 cannot certify an L1 error below {FLOAT32_MIN_TOL:g} (tol={tol:g}): "
                "use dtype=float64"
            )
        self._set(
            alpha=check_probability("alpha", self.alpha, closed_right=False),
            tol=tol,
            method=method,
            max_iter=_optional(check_count, "max_iter", self.max_iter),
            dtype=dtype,
            topk=_optional(check_count, "topk", self.topk),
            seed=_seed(self.seed),
            block=_optional(check_count, "block", self.block),
            r_max=r_max,
        )


@dataclass(frozen=True)
class IndexOptions(_Options):
    """Scalar options of ``operators.build_ppr_index`` (see there); None stays None."""

    alpha: float = _help(0.8, "probability of following an edge")
    epsilon: float = _help(0.5, "relative error guarantee")
    delta_min: float | None = _help(None, "smallest PPR value served (default 16/n)")
    p_fail: float | None = _help(None, "failure probability (default 1/n)")
    budget: float = _help(0.2, "extra walks for the top of the PRO-rank list, a share of the base walks")
    seed: int = _help(0, "seed of the walks")
    first_step: bool = _help(True, "index walks that take their first step")
    order: str | None = _help("auto", "index graph order, hubs first (auto: degree from 2^22 vertices)")

    def __post_init__(self):
        from graphs import reorder_orders

        orders = ("auto", *reorder_orders())
        if self.order is not None and not (isinstance(self.order, str) and self.order in orders):
            raise OptionError(f"order must be one of {orders} or None, got {self.order!r}")
        positive = dict(closed_left=False)  # delta_min and p_fail divide: r_max and psi
        self._set(
            alpha=check_probability("alpha", self.alpha, closed_right=False),
            epsilon=check_positive("epsilon", self.epsilon),
            delta_min=_optional(check_probability, "delta_min", self.delta_min, **positive),
            p_fail=_optional(check_probability, "p_fail", self.p_fail, **positive),
            budget=check_positive("budget", self.budget) if self.budget else 0.0,
            seed=_seed(self.seed),
            first_step=_flag("first_step", self.first_step),
        )


@dataclass(frozen=True)
class TopkOptions(_Options):
    """Scalar options of ``operators.topk_ppr`` (see there); None stays None."""

    k: int = _help(100, "vertices per source")
    epsilon: float | None = _help(None, "relative error target (default: the index's)")
    delta_init: float | None = _help(None, "first delta (default 1 / (10 k log n))")
    max_rounds: int = _help(10, "rounds before the Monte Carlo fallback")
    seed: int = _help(0, "seed of the fallback walks")
    refine: bool = _help(True, "re-estimate the vertices near the k-th estimate from their in-neighbours'")

    def __post_init__(self):
        self._set(
            k=check_count("k", self.k),
            epsilon=_optional(check_positive, "epsilon", self.epsilon),
            delta_init=_optional(check_probability, "delta_init", self.delta_init, closed_left=False),
            max_rounds=check_count("max_rounds", self.max_rounds),
            seed=_seed(self.seed),
            refine=_flag("refine", self.refine),
        )


@dataclass(frozen=True)
class TopkTuning(_Options):
    """The switches of the top-k PPR ablation (``operators.topk_ppr(tuning=...)``): all on by default.

    None changes the guarantee; each turns off one part of the query as the paper's ablation does, or
    one of graphjobs' changes to its schedule.
    """

    adaptive: bool = _help(True, "per-vertex push thresholds (off: beta = 1)")
    high_irw: bool = _help(True, "the H set's bound reduction and tighter bound")
    tiling: bool = _help(True, "tile-based GPU kernels (off: a thread per vertex)")
    persistent: bool = _help(True, "GPU: each round's push in one cooperative launch")
    jump: bool = _help(True, "after a failed round, halve delta as often as its estimates show is needed")

    def __post_init__(self):
        self._set(**{f.name: _flag(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)})


@dataclass(frozen=True)
class IMMOptions(_Options):
    """Scalar options of ``operators.influence_maximization`` (see there); ``k`` has no default."""

    k: int = _help(text="seeds (per round)")
    epsilon: float = _help(0.1, "approximation slack, in (0, 1)")
    ell: float = _help(1.0, "failure probability n^-ell")
    model: str = _help("IC", "IC or LT")
    weights: object = _help("wc", "wc, trivalency, graph, or a probability")
    rounds: int = _help(1, "multi-round IM: k seeds in each round")
    seed: int = _help(0, "seed of the RR samples and trivalency weights")
    max_rr_sets: int | None = _help(None, "cap on RR samples (voids the guarantee)")
    reuse_rr_sets: bool = _help(False, "reuse the estimation samples in the final selection")

    def __post_init__(self):
        from operators.influence.model import check_model, weights_spec

        self._set(
            k=check_count("k", self.k),
            epsilon=_check_unit("epsilon", self.epsilon),  # from 1 - 1/e on, the guarantee says nothing
            ell=check_positive("ell", self.ell),
            model=check_model(self.model),
            weights=weights_spec(self.weights),
            rounds=check_count("rounds", self.rounds),
            seed=_seed(self.seed),
            max_rr_sets=_optional(check_count, "max_rr_sets", self.max_rr_sets),
            reuse_rr_sets=_flag("reuse_rr_sets", self.reuse_rr_sets),
        )


@dataclass(frozen=True)
class SimRankOptions(_Options):
    """Scalar options of ``operators.simrank`` and ``operators.simrank_topk`` (see there)."""

    k: int = _help(100, "similar vertices kept per source")
    c: float = _help(0.6, "SimRank decay factor, in (0, 1)")
    epsilon: float = _help(1e-3, "additive error target, in (0, 1)")
    clip: bool = _help(True, "ClipSim's allocation (off: ExactSim's)")
    samples: object = _help("bound", "bound (proven R), practical (the published codes' R) or a number")
    seed: int = _help(0, "seed of the meeting walks")

    def __post_init__(self):
        self._set(
            k=check_count("k", self.k),
            c=_check_unit("c", self.c),
            epsilon=_check_unit("epsilon", self.epsilon),
            clip=bool(self.clip),
            samples=_check_samples(self.samples),
            seed=_seed(self.seed),
        )


def _check_unit(name: str, value) -> float:
    value = check_positive(name, value)
    if not value < 1:
        raise OptionError(f"{name} must be in (0, 1), got {value!r}")
    return value


def _check_samples(samples):
    from operators.simrank.plan import SAMPLES

    if isinstance(samples, str):
        if samples not in SAMPLES:
            raise OptionError(f"samples must be one of {SAMPLES} or a positive number, got {samples!r}")
        return samples
    return check_positive("samples", samples)
