"""The RAPIDS paths (cuDF, dask_cudf, cuGraph), where they are installed, against the host readers,
``from_edges`` and our own operators. Without RAPIDS every test here skips; the clear ImportError
without it is tested in test_interop.py."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import graphs
import operators
from graphs._device import to_host

pytestmark = pytest.mark.gpu

SRC, DST, W = ["a", "b", "c", "a", "d"], ["b", "c", "a", "c", "a"], [1.0, 2.0, 0.5, 1.5, 3.0]


def _same(g, h):
    g, h = g.to("cpu"), h.to("cpu")
    assert (g.n, g.m, g.directed, g.weighted) == (h.n, h.m, h.directed, h.weighted)
    np.testing.assert_array_equal(g.indptr, h.indptr)
    np.testing.assert_array_equal(g.indices, h.indices)
    if g.weighted:
        np.testing.assert_allclose(g.weights, h.weights)
    assert g.ids.tolist() == h.ids.tolist()


def test_from_cudf_string_and_integer_labels():
    cudf = pytest.importorskip("cudf")
    df = cudf.DataFrame({"s": SRC, "d": DST, "w": W})
    g = graphs.from_cudf(df, source="s", destination="d", weight="w")
    assert g.device == "gpu"
    _same(g, graphs.from_edges(np.array(SRC, dtype=object), np.array(DST, dtype=object), np.array(W)))
    ints = cudf.DataFrame({"src": [10, 20, 10, 30], "dst": [20, 30, 30, 10]})
    h = graphs.from_cudf(ints, directed=False)
    _same(h, graphs.from_edges(np.array([10, 20, 10, 30]), np.array([20, 30, 30, 10]), directed=False))
    with pytest.raises(KeyError, match="not in the DataFrame"):
        graphs.from_cudf(df, source="s", destination="nope")


def test_from_dask_cudf_joins_the_partitions():
    cudf = pytest.importorskip("cudf")
    dask_cudf = pytest.importorskip("dask_cudf")
    df = cudf.DataFrame({"s": SRC * 20, "d": DST * 20, "w": W * 20})
    ddf = dask_cudf.from_cudf(df, npartitions=3)
    _same(
        graphs.from_dask_cudf(ddf, source="s", destination="d", weight="w"),
        graphs.from_cudf(df, source="s", destination="d", weight="w"),
    )


@pytest.mark.parametrize("gz", [False, True])
def test_read_edgelist_cudf_engine_equals_pyarrow(tmp_path, gz):
    pytest.importorskip("cudf")
    rng = np.random.default_rng(3)
    edges = rng.integers(0, 500, size=(3000, 2)) * 7 + 1
    text = "# a SNAP-style file\n# FromNodeId\tToNodeId\n" + "".join(f"{u}\t{v}\n" for u, v in edges)
    path = tmp_path / ("e.txt.gz" if gz else "e.txt")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    got = graphs.read_edgelist(path, engine="cudf", device="gpu")
    assert got.device == "gpu"
    _same(got, graphs.read_edgelist(path, engine="pyarrow"))
    words = tmp_path / "w.csv"
    words.write_text("src,dst,weight\nann,bob,1.5\nbob,cy,2\ncy,ann,0.25\n")
    opts = dict(delimiter=",", weighted=True, weight_col=2)
    _same(
        graphs.read_edgelist(words, engine="cudf", **opts),
        graphs.read_edgelist(words, engine="pyarrow", **opts),
    )
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\n3\n")
    with pytest.raises(graphs.GraphFormatError, match=r"bad\.txt"):
        graphs.read_edgelist(bad, engine="cudf")


def test_vertex_frame_as_cudf():
    cudf = pytest.importorskip("cudf")
    g = graphs.from_edges(np.array(SRC, dtype=object), np.array(DST, dtype=object)).to("gpu")
    x = operators.pagerank(g, tol=1e-10)
    for library in ("cudf", "auto"):
        frame = graphs.vertex_frame(g, x, "pagerank", library=library)
        assert isinstance(frame, cudf.DataFrame) and list(frame.columns) == ["vertex", "pagerank"]
        assert frame["vertex"].to_arrow().to_pylist() == g.ids.tolist()
        np.testing.assert_allclose(frame["pagerank"].to_numpy(), to_host(x))
    assert not isinstance(graphs.vertex_frame(g, to_host(x), "pagerank", library="auto"), cudf.DataFrame)


def test_cugraph_round_trip_and_pagerank():
    cugraph = pytest.importorskip("cugraph")
    g = graphs.rmat(10, seed=1, weighted=True, dedupe=True, device="gpu")
    Gc = graphs.to_cugraph(g)
    assert Gc.is_directed() and Gc.number_of_edges() == g.m
    pr = cugraph.pagerank(Gc, alpha=0.85, tol=1e-7).to_pandas()
    theirs = np.zeros(g.n)
    theirs[pr["vertex"].to_numpy()] = pr["pagerank"].to_numpy()
    ours = to_host(operators.pagerank(g, tol=1e-12, dtype=np.float64))
    assert np.abs(theirs - ours).sum() < 1e-5  # cuGraph's stop: an L1 change below 1e-7, float32
    back = graphs.from_cugraph(Gc)  # its edge list: isolated vertices are not in it
    bsrc, bdst, _ = back.to("cpu").edges()
    ids = to_host(back.ids)
    src, dst, _ = g.to("cpu").edges()
    assert sorted(zip(ids[bsrc].tolist(), ids[bdst].tolist(), strict=True)) == sorted(
        zip(src.tolist(), dst.tolist(), strict=True)
    )
    assert back.weighted and back.m == g.m
