"""The options objects: each default stated once, checked once, frozen, tokenized for Dask, and the same
answers from ``options=`` as from the keywords."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from dask.base import tokenize

import graphs
import operators
from graphs.errors import OptionError
from operators import (
    IMMOptions,
    IndexOptions,
    PageRankOptions,
    PPROptions,
    SimRankOptions,
    TopkOptions,
    TopkTuning,
)

CLASSES = (PageRankOptions, PPROptions, IndexOptions, TopkOptions, TopkTuning, SimRankOptions)


def _made(cls, **changes):
    return cls(**({"k": 5} if cls is IMMOptions else {}), **changes)


def test_defaults():
    assert dataclasses.astuple(PageRankOptions()) == (0.85, 100, 1e-6, "auto")
    p = PPROptions()
    assert (p.alpha, p.tol, p.method, p.max_iter, p.dtype, p.topk, p.seed, p.block) == (
        0.8,
        1e-6,
        "auto",
        None,
        np.dtype(np.float64),
        None,
        0,
        None,
    )
    assert dataclasses.astuple(IndexOptions()) == (0.8, 0.5, None, None, 0.2, 0, True, "auto")
    assert dataclasses.astuple(TopkOptions()) == (100, None, None, 10, 0, True)
    assert dataclasses.astuple(TopkTuning()) == (True, True, True, True, True)
    assert dataclasses.astuple(IMMOptions(k=7)) == (7, 0.1, 1.0, "IC", "wc", 1, 0, None, False)
    assert dataclasses.astuple(SimRankOptions()) == (100, 0.6, 1e-3, True, "bound", 0)
    # the operators' signatures read them
    assert PageRankOptions.alpha == 0.85 and PPROptions.alpha == 0.8 and IndexOptions.epsilon == 0.5
    with pytest.raises(TypeError):
        IMMOptions()  # k has no default


def test_every_field_has_help():
    for cls in (*CLASSES, IMMOptions):
        for f in dataclasses.fields(cls):
            assert cls.help(f.name), (cls.__name__, f.name)


BAD = [
    (PageRankOptions, {"alpha": 1.5}, r"alpha must be in \[0, 1\]"),
    (PageRankOptions, {"max_iter": 0}, "max_iter must be an integer >= 1"),
    (PageRankOptions, {"tol": -1.0}, "tol must be a positive number"),
    (PageRankOptions, {"method": "sideways"}, "method must be one of"),
    (PPROptions, {"alpha": 1.0}, r"alpha must be in \[0, 1\)"),
    (PPROptions, {"dtype": np.int32}, "dtype must be float32 or float64"),
    (PPROptions, {"topk": 0}, "topk must be an integer >= 1"),
    (PPROptions, {"block": 2.5}, "block must be an integer >= 1"),
    (IndexOptions, {"epsilon": 0}, "epsilon must be a positive number"),
    (IndexOptions, {"delta_min": 0.0}, r"delta_min must be in \(0, 1\]"),
    (IndexOptions, {"order": "random"}, "order must be one of"),
    (TopkOptions, {"k": 2.5}, "k must be an integer >= 1"),
    (TopkOptions, {"delta_init": 0}, r"delta_init must be in \(0, 1\]"),
    (TopkOptions, {"max_rounds": 0}, "max_rounds must be an integer >= 1"),
    (IMMOptions, {"model": "SIR"}, "model must be one of"),
    (IMMOptions, {"weights": 2.0}, r"probability must be in \[0, 1\]"),
    (IMMOptions, {"rounds": 0}, "rounds must be an integer >= 1"),
    (SimRankOptions, {"c": 1.0}, r"c must be in \(0, 1\)"),
    (SimRankOptions, {"samples": "lots"}, "samples must be one of"),
]


@pytest.mark.parametrize("cls, bad, message", BAD, ids=[f"{c.__name__}-{next(iter(b))}" for c, b, _ in BAD])
def test_bad_values_raise_option_error(cls, bad, message):
    with pytest.raises(OptionError, match=message) as err:
        _made(cls, **bad)
    assert isinstance(err.value, ValueError)
    with pytest.raises(OptionError, match=message):  # replace validates as making does
        _made(cls).replace(**bad)


def test_flags_must_be_booleans():
    with pytest.raises(TypeError, match="refine must be True or False"):
        TopkOptions(refine="yes")
    with pytest.raises(TypeError, match="jump must be True or False"):
        TopkTuning(jump=1)


def test_values_are_normalised():
    assert IMMOptions(k=3, model="lt").model == "LT"
    assert PPROptions(dtype="float32", tol=1e-4).dtype == np.dtype(np.float32)
    assert IndexOptions(budget=0).budget == 0.0
    assert isinstance(PageRankOptions(alpha=1).alpha, float)


@pytest.mark.parametrize("cls", (*CLASSES, IMMOptions), ids=lambda c: c.__name__)
def test_frozen_and_tokenized(cls):
    o = _made(cls)
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(o, name, getattr(o, name))
    assert tokenize(o) == tokenize(_made(cls)) and o == _made(cls) and hash(o) == hash(_made(cls))
    for f in dataclasses.fields(cls):  # every field counts in the token
        other = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v / 2}
        value = getattr(o, f.name)
        if type(value) in other:
            changed = o.replace(**{f.name: other[type(value)](value)})
            assert tokenize(changed) != tokenize(o), f.name
    assert tokenize(PageRankOptions()) != tokenize(PageRankOptions(method="pull"))
    assert tokenize(PPROptions(tol=1e-4)) != tokenize(PPROptions(dtype=np.float32, tol=1e-4))


def test_replace_returns_a_new_checked_object():
    o = PageRankOptions()
    p = o.replace(alpha=0.9)
    assert p.alpha == 0.9 and o.alpha == 0.85 and p.tol == o.tol


@pytest.fixture(scope="module")
def g():
    return graphs.rmat(7, edge_factor=8, seed=3, device="cpu")


def _source(g):
    return g.ids[int(np.argmax(np.diff(g.indptr)))]


def test_pagerank_options_and_keywords_agree(g):
    a = operators.pagerank(g, alpha=0.9, tol=1e-10, max_iter=300, method="push")
    b = operators.pagerank(g, options=PageRankOptions(alpha=0.9, tol=1e-10, max_iter=300, method="push"))
    c = operators.pagerank(g, alpha=0.85, tol=1e-10, max_iter=300)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).sum() > 1e-4  # alpha counts
    # a keyword equal to the options' value, or left at its default, is no conflict
    same = PageRankOptions(alpha=0.9, tol=1e-10, max_iter=300, method="push")
    np.testing.assert_array_equal(a, operators.pagerank(g, alpha=0.9, options=same))
    with pytest.raises(OptionError, match=r"alpha=0\.7 conflicts with options\.alpha=0\.9"):
        operators.pagerank(g, alpha=0.7, options=PageRankOptions(alpha=0.9))
    with pytest.raises(TypeError, match="options must be a PageRankOptions"):
        operators.pagerank(g, options=PPROptions())


def test_ppr_options_and_keywords_agree(g):
    s = [_source(g)]
    kw = dict(alpha=0.7, tol=1e-8, method="push", topk=10)
    va, xa = operators.ppr(g, s, **kw)
    vb, xb = operators.ppr(g, s, options=PPROptions(**kw))
    np.testing.assert_array_equal(va, vb)
    np.testing.assert_array_equal(xa, xb)
    assert xa[0, 0] > 0.3  # the source keeps at least 1 - alpha
    with pytest.raises(OptionError, match="method='power' conflicts"):
        operators.ppr(g, s, method="power", options=PPROptions(**kw))


def test_index_and_topk_options_and_keywords_agree(g):
    a = operators.build_ppr_index(g, alpha=0.75, epsilon=0.4, seed=2)
    b = operators.build_ppr_index(g, options=IndexOptions(alpha=0.75, epsilon=0.4, seed=2))
    assert a.params == b.params and a.walks == b.walks
    np.testing.assert_array_equal(a.arrays["omega"], b.arrays["omega"])
    with pytest.raises(OptionError, match="seed=3 conflicts"):
        operators.build_ppr_index(g, seed=3, options=IndexOptions(seed=2))
    s = [_source(g)]
    x = operators.topk_ppr(a, s, k=12, seed=4, refine=False)
    y = operators.topk_ppr(a, s, options=TopkOptions(k=12, seed=4, refine=False))
    np.testing.assert_array_equal(x.vertices, y.vertices)
    np.testing.assert_array_equal(x.ppr, y.ppr)
    assert x.vertices.shape == (1, 12) and x.ppr[0, 0] > 0
    with pytest.raises(OptionError, match="k=5 conflicts"):
        operators.topk_ppr(a, s, k=5, options=TopkOptions(k=12))
    with pytest.raises(TypeError, match="tuning must be a TopkTuning"):
        operators.topk_ppr(a, s, tuning={"jump": False})
    z = operators.topk_ppr(a, s, k=12, seed=4, refine=False, tuning=TopkTuning(jump=False, adaptive=False))
    assert set(z.vertices[0][:5]) == set(x.vertices[0][:5])


def test_imm_options_and_keywords_agree(g):
    a = operators.influence_maximization(g, 3, epsilon=0.3, model="LT", seed=1)
    b = operators.influence_maximization(g, options=IMMOptions(k=3, epsilon=0.3, model="LT", seed=1))
    np.testing.assert_array_equal(a.seeds, b.seeds)
    assert a.spread == b.spread and a.theta == b.theta and a.model == "LT" and len(a.seeds) == 3
    with pytest.raises(OptionError, match="k=4 conflicts"):
        operators.influence_maximization(g, 4, options=IMMOptions(k=3))
    with pytest.raises(TypeError, match="needs k"):
        operators.influence_maximization(g)


def test_simrank_options_and_keywords_agree(g):
    s = _source(g)
    kw = dict(c=0.5, epsilon=0.05, samples="practical", seed=3)
    a = operators.simrank(g, s, **kw)
    b = operators.simrank(g, s, options=SimRankOptions(**kw))
    np.testing.assert_array_equal(a, b)
    assert float(a[g.internal_ids(np.array([s]))[0]]) == 1.0
    t = operators.simrank_topk(g, [s], k=5, **kw)
    u = operators.simrank_topk(g, [s], options=SimRankOptions(k=5, **kw))
    np.testing.assert_array_equal(t.vertices, u.vertices)
    np.testing.assert_array_equal(t.scores, u.scores)
    with pytest.raises(OptionError, match=r"c=0\.7 conflicts"):
        operators.simrank(g, s, c=0.7, options=SimRankOptions(c=0.5))


@pytest.mark.parametrize("epsilon", [0, 1, 5, -0.1])
def test_imm_epsilon_is_refused_outside_the_open_unit_interval(epsilon):
    from operators.options import IMMOptions

    with pytest.raises(OptionError, match=r"epsilon must be"):
        IMMOptions(k=3, epsilon=epsilon)
    assert IMMOptions(k=3, epsilon=0.99).epsilon == 0.99
