"""Every result comes as a pandas DataFrame with original labels: ``as_frame=True`` where the operator returns
arrays (``pagerank``, ``simrank``, ``ppr``), ``to_frame()`` on the result types (``TopkPPR``,
``SimRankTopk``, ``InfluenceResult``), and ``to_dict()`` in NetworkX's shapes; the frames hold the
arrays' values exactly."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
from operators import build_ppr_index, influence_maximization, pagerank, ppr, simrank, simrank_topk, topk_ppr


@pytest.fixture(scope="module")
def g():
    return graphs.toy.labeled()  # a..e, internal ids 0..4


def test_pagerank_frame_is_the_array_by_label(g):
    x = pagerank(g, tol=1e-12)
    frame = pagerank(g, tol=1e-12, as_frame=True)
    assert list(frame.columns) == ["vertex", "pagerank"]
    assert frame["vertex"].tolist() == ["a", "b", "c", "d", "e"]
    np.testing.assert_array_equal(frame["pagerank"].to_numpy(), x)
    r = pagerank(g, tol=1e-12, reorder=True, as_frame=True)  # iterated in another order: the same labels
    assert r["vertex"].tolist() == frame["vertex"].tolist()
    np.testing.assert_allclose(r["pagerank"], x, atol=1e-12)


def test_simrank_frame_is_the_array_by_label(g):
    s = simrank(g, "c", epsilon=0.05, seed=3)
    frame = simrank(g, "c", epsilon=0.05, seed=3, as_frame=True)
    assert list(frame.columns) == ["vertex", "simrank"] and frame["vertex"].tolist() == list("abcde")
    np.testing.assert_array_equal(frame["simrank"].to_numpy(), s)
    assert dict(zip(frame.vertex, frame.simrank, strict=True))["c"] == 1.0


def test_ppr_dense_frame_holds_every_source_and_vertex(g):
    x = ppr(g, ["c", "a"], method="power", tol=1e-12)
    frame = ppr(g, ["c", "a"], method="power", tol=1e-12, as_frame=True)
    assert list(frame.columns) == ["source", "vertex", "ppr"] and len(frame) == 2 * g.n
    assert frame["source"].tolist() == ["c"] * 5 + ["a"] * 5
    assert frame["vertex"].tolist() == list("abcde") * 2
    wide = frame.pivot(index="source", columns="vertex", values="ppr").loc[["c", "a"], list("abcde")]
    np.testing.assert_array_equal(wide.to_numpy(), x)


def test_ppr_topk_frame_lists_the_real_rows(g):
    labels, values = ppr(g, ["d", "e"], topk=3, tol=1e-10)
    frame = ppr(g, ["d", "e"], topk=3, tol=1e-10, as_frame=True)
    assert list(frame.columns) == ["source", "rank", "vertex", "ppr"]
    # "e" reaches only itself: one real row, its padding (-1, 0) is not listed
    assert frame["source"].tolist() == ["d", "d", "d", "e"] and frame["rank"].tolist() == [1, 2, 3, 1]
    assert frame["vertex"].tolist() == [*labels[0].tolist(), "e"] and labels[1, 1] == -1
    np.testing.assert_array_equal(frame["ppr"].to_numpy(), [*values[0], values[1, 0]])


def test_topk_ppr_to_frame_and_to_dict_match_the_rows(g):
    res = topk_ppr(build_ppr_index(g, seed=0), ["a", "e"], k=3)
    frame = res.to_frame()
    by_source = res.to_dict()
    assert list(by_source) == ["a", "e"]
    for i, s in enumerate(["a", "e"]):
        vertices, values = res.row(i)
        assert by_source[s] == dict(zip(vertices.tolist(), values.tolist(), strict=True))
        rows = frame[frame["source"] == s]
        assert rows["vertex"].tolist() == vertices.tolist() and rows["rank"].tolist() == list(
            range(1, len(vertices) + 1)
        )
        np.testing.assert_array_equal(rows["ppr"].to_numpy(), values)
    assert by_source["e"] == {"e": pytest.approx(1.0)}  # a dangling source keeps all its PPR


def test_simrank_topk_to_dict_is_networkx_nested_shape(g):
    res = simrank_topk(g, ["c", "d"], k=2, epsilon=0.05)
    by_source = res.to_dict()
    assert by_source["d"] == {}  # no in-neighbours: similar to nothing
    vertices, scores = res.row(0)
    assert by_source["c"] == dict(zip(vertices.tolist(), scores.tolist(), strict=True)) and len(vertices) == 2
    frame = res.to_frame()
    assert frame["source"].tolist() == ["c", "c"] and frame["vertex"].tolist() == vertices.tolist()


@pytest.mark.parametrize("rounds", [1, 2])
def test_influence_result_to_frame_and_to_dict(rounds):
    g = graphs.barabasi_albert(200, 3, seed=1)
    src, dst, _ = g.edges()
    labelled = graphs.from_edges(np.char.add("v", src.astype(str)), np.char.add("v", dst.astype(str)))
    res = influence_maximization(labelled, 3, rounds=rounds, seed=0)
    frame = res.to_frame()
    assert list(frame.columns) == ["rank", "vertex", "round", "gain"] and frame["rank"].tolist() == list(
        range(1, 3 * rounds + 1)
    )
    assert frame["vertex"].tolist() == res.seeds.tolist() and all(str(v).startswith("v") for v in res.seeds)
    assert frame["round"].tolist() == res.seed_rounds.tolist()
    np.testing.assert_array_equal(frame["gain"].to_numpy(), res.gains)
    assert frame["gain"].sum() == pytest.approx(res.spread)
    got = res.to_dict()
    if rounds == 1:
        assert got == dict(zip(res.seeds.tolist(), res.gains.tolist(), strict=True))
    else:
        assert list(got) == list(zip(res.seeds.tolist(), res.seed_rounds.tolist(), strict=True))
