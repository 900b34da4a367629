"""graphs.partition: contiguous destination ranges with balanced in-edge counts, saved and loaded."""

from __future__ import annotations

import numpy as np
import pytest

import graphs
from graphs.errors import GraphFormatError


@pytest.mark.parametrize("parts", [1, 2, 3, 4, 8])
def test_ranges_cover_every_in_edge_once_and_balance(parts):
    g = graphs.rmat(13, seed=3, device="cpu")
    pg = graphs.partition(g, parts)
    assert pg.bounds[0] == 0 and pg.bounds[-1] == g.n and np.all(np.diff(pg.bounds) >= 0)
    counts = pg.edge_counts()
    assert counts.sum() == g.m
    assert np.abs(counts - g.m / parts).max() <= 0.10 * g.m / parts  # the 10% bound
    T = g.transpose()
    for p in pg.parts:  # each part is exactly the transposed CSR's rows lo..hi-1
        a, b = int(T.indptr[p.lo]), int(T.indptr[p.hi])
        np.testing.assert_array_equal(p.indptr, T.indptr[p.lo : p.hi + 1] - a)
        np.testing.assert_array_equal(p.indices, T.indices[a:b])
        np.testing.assert_array_equal(p.out_degree, g.out_degree())


def test_one_heavy_vertex_bounds_the_imbalance():
    # a star: vertex 0 receives every edge, so one part holds them all and the others are empty
    g = graphs.toy.star_in(100)
    pg = graphs.partition(g, 4)
    assert sorted(pg.edge_counts().tolist()) == [0, 0, 0, 100]


def test_save_load_round_trip_and_damage(tmp_path):
    g = graphs.from_edges(["a", "b", "c", "c"], ["b", "c", "a", "b"], weights=np.array([1.0, 2.0, 3.0, 4.0]))
    pg = graphs.partition(g, 2)
    pg.save(tmp_path / "pg")
    back = graphs.load_partitioned(tmp_path / "pg")
    assert back.token == pg.token and back.path == str((tmp_path / "pg").resolve())
    assert back.ids.tolist() == ["a", "b", "c"] and back.weighted
    for a, b in zip(pg.parts, back.parts, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.weights, b.weights)
        np.testing.assert_array_equal(a.out_weight, b.out_weight)
    with pytest.raises(FileExistsError):
        pg.save(tmp_path / "pg")
    np.save(tmp_path / "pg" / "part-1" / "indices.npy", np.zeros(back.parts[1].m, dtype=np.int32))
    with pytest.raises(GraphFormatError, match="checksum"):
        graphs.load_partitioned(tmp_path / "pg")
    with pytest.raises(GraphFormatError, match=r"meta\.json"):
        graphs.load_partitioned(tmp_path)


def test_bad_part_counts():
    g = graphs.toy.chain(5)
    for bad in (0, -1, g.n + 1, 2.0, True):
        with pytest.raises(ValueError, match="parts"):
            graphs.partition(g, bad)
