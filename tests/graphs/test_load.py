"""read_edgelist: every format and layout, errors that name the line, the real SNAP files."""

from __future__ import annotations

import bz2
import gzip

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphs
import graphs.read
from graphs import GraphFormatError, read_edgelist
from tests.conftest import dataset_path


def labelled_edges(g):
    s, d, w = g.edges()
    out = list(zip(g.ids[s].tolist(), g.ids[d].tolist(), strict=True))
    if w is not None:
        out = [(a, b, float(x)) for (a, b), x in zip(out, w.tolist(), strict=True)]
    return sorted(out)


def write(tmp_path, name, text, opener=open):
    path = tmp_path / name
    with opener(path, "wt", newline="") as f:
        f.write(text)
    return path


SNAP = (
    "# Directed graph\r\n# Nodes: 4 Edges: 4\r\n# FromNodeId\tToNodeId\r\n"
    "10\t20\r\n20\t30\r\n30\t10\r\n30\t40\r\n"
)
EXPECTED = [(10, 20), (20, 30), (30, 10), (30, 40)]


@pytest.mark.parametrize(
    ("name", "text", "opener"),
    [
        ("crlf.txt", SNAP, open),
        ("lf.txt", SNAP.replace("\r\n", "\n"), open),
        ("g.txt.gz", SNAP, gzip.open),
        ("g.txt.bz2", SNAP, bz2.open),
        ("spaces.txt", SNAP.replace("\t", " "), open),
        ("ragged.txt", "# c\n10   20\n  20 30\n30\t10 \n\n30 40\n", open),
        ("midcomment.txt", "10\t20\n# in the middle\n20\t30\n30\t10\n30\t40\n", open),
        ("g.csv", "src,dst\n10,20\n20,30\n30,10\n30,40\n", open),
        ("g.tsv", "10\t20\n20\t30\n30\t10\n30\t40\n", open),
    ],
)
def test_text_layouts(tmp_path, name, text, opener):
    g = read_edgelist(write(tmp_path, name, text, opener))
    assert labelled_edges(g) == EXPECTED
    assert g.ids.tolist() == [10, 20, 30, 40]


def test_pandas_and_pyarrow_engines_agree(tmp_path):
    path = write(tmp_path, "g.txt", SNAP)
    a, b = read_edgelist(path, engine="pyarrow"), read_edgelist(path, engine="pandas")
    assert a.token == b.token


def test_ids_beyond_int64_name_their_line_on_both_engines(tmp_path):
    edge = write(tmp_path, "edge.txt", f"0 1\n{2**63 - 1} {-(2**63)}\n")  # the extremes still read
    assert read_edgelist(edge).ids.tolist() == [-(2**63), 0, 1, 2**63 - 1]
    path = write(tmp_path, "big.txt", "0 1\n1 2\n5 99999999999999999999\n")
    for engine in ("pandas", "pyarrow"):
        with pytest.raises(GraphFormatError, match=r"big.txt, line 3: expected a vertex id in the int64"):
            read_edgelist(path, engine=engine)


def test_string_labels_weights_and_named_columns(tmp_path):
    path = write(tmp_path, "w.csv", "when,from,to,w\n1,alice,bob,0.5\n2,bob,carol,2\n3,carol,alice,1.25\n")
    g = read_edgelist(path, src_col="from", dst_col="to", weight_col="w")
    assert g.weighted and g.ids.tolist() == ["alice", "bob", "carol"]
    assert labelled_edges(g) == [("alice", "bob", 0.5), ("bob", "carol", 2.0), ("carol", "alice", 1.25)]
    h = read_edgelist(write(tmp_path, "w.txt", "a b 1\nb c 2\n"), weighted=True)
    assert labelled_edges(h) == [("a", "b", 1.0), ("b", "c", 2.0)]
    named = write(tmp_path, "n.csv", "src,dst\nx,y\ny,z\n")  # CSV: a non-numeric first row is a header
    assert labelled_edges(read_edgelist(named)) == [("x", "y"), ("y", "z")]
    assert read_edgelist(named, header=False).n == 5


def test_undirected_dedupe_and_self_loops(tmp_path):
    path = write(tmp_path, "u.txt", "1 2\n2 1\n2 2\n2 3\n")
    g = read_edgelist(path, directed=False)
    assert g.m == 7  # 3 non-loop lines twice each + the loop once
    d = read_edgelist(path, directed=False, dedupe=True)
    assert labelled_edges(d) == [(1, 2), (2, 1), (2, 2), (2, 3), (3, 2)]
    n = read_edgelist(path, self_loops=False)
    assert (2, 2) not in labelled_edges(n) and n.m == 3


def test_parquet(tmp_path):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"a": [5, 6, 7], "b": [6, 7, 5], "w": [1.0, 2.0, 3.0]}), path)
    g = read_edgelist(path, weight_col="w", src_col="a", dst_col="b")
    assert labelled_edges(g) == [(5, 6, 1.0), (6, 7, 2.0), (7, 5, 3.0)]
    assert labelled_edges(read_edgelist(path)) == [(5, 6), (6, 7), (7, 5)]  # columns 0 and 1
    pq.write_table(pa.table({"a": [5, None], "b": [6, 7]}), tmp_path / "null.parquet")
    with pytest.raises(GraphFormatError, match="row 1: expected a value in column 'a'"):
        read_edgelist(tmp_path / "null.parquet")
    with pytest.raises(GraphFormatError, match="column named 'zz'"):
        read_edgelist(path, src_col="zz")
    pq.write_table(pa.table({"a": [1, 2], "b": [2, 1], "w": [1.0, -1.0]}), tmp_path / "neg.parquet")
    with pytest.raises(GraphFormatError, match="row 1: expected a finite, non-negative"):
        read_edgelist(tmp_path / "neg.parquet", weighted=True)


MTX = "%%MatrixMarket matrix coordinate real {sym}\n% comment\n4 4 3\n1 2 0.5\n2 3 1.5\n4 4 2.0\n"


def test_matrix_market(tmp_path):
    g = read_edgelist(write(tmp_path, "g.mtx", MTX.format(sym="general")), weighted=True)
    assert g.n == 4 and g.ids.tolist() == [1, 2, 3, 4]  # isolated vertices kept, 1-based labels
    assert labelled_edges(g) == [(1, 2, 0.5), (2, 3, 1.5), (4, 4, 2.0)]
    s = read_edgelist(write(tmp_path, "s.mtx", MTX.format(sym="symmetric")))
    assert not s.directed and labelled_edges(s) == [(1, 2), (2, 1), (2, 3), (3, 2), (4, 4)]
    pattern = "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 1\n"
    assert labelled_edges(read_edgelist(write(tmp_path, "p.mtx", pattern))) == [(1, 2), (3, 1)]
    with pytest.raises(GraphFormatError, match="pattern"):
        read_edgelist(tmp_path / "p.mtx", weighted=True)


@pytest.mark.parametrize(
    ("name", "text", "line", "message"),
    [
        (
            "id.txt",
            "# h\n1\t2\n3\tx17\n4\t5\n",
            3,
            "expected an integer vertex id \\(target, column 2\\), got 'x17'",
        ),
        ("col.txt", "1\t2\n3\n4\t5\n", 2, "expected at least 2 columns"),
        ("neg.txt", "1 2 0.5\n2 3 -1\n", 2, "non-negative edge weight, got '?-1"),
        ("nan.txt", "1 2 0.5\n\n2 3 nan\n", 3, "non-negative edge weight, got '?nan"),
        ("wtxt.txt", "1 2 0.5\n2 3 heavy\n", 2, "numeric weight in column 3, got 'heavy'"),
        ("float.csv", "1,2\n2.5,3\n", 2, "integer vertex id \\(source, column 1\\), got '2.5'"),
        ("crlf.txt", "1\t2\r\n3\t4\r\n5\t?\r\n", 3, "got '\\?'"),
        ("mtxsize.mtx", "%%MatrixMarket matrix coordinate real general\n3 4 1\n1 2 1\n", 2, "square matrix"),
        (
            "mtxidx.mtx",
            "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n1 9\n",
            4,
            "index in 1..3, got 9",
        ),
        ("mtxban.mtx", "%%MatrixMarket matrix array real general\n3 3\n", 1, "'matrix coordinate'"),
    ],
)
def test_errors_name_file_and_line(tmp_path, name, text, line, message):
    path = write(tmp_path, name, text)
    weighted = name in ("neg.txt", "nan.txt", "wtxt.txt")
    with pytest.raises(GraphFormatError, match=message) as info:
        read_edgelist(path, weighted=weighted)
    assert info.value.line == line and info.value.path == str(path)
    assert f"{path}, line {line}:" in str(info.value)


def test_damaged_compressed_files_name_the_file(tmp_path):
    rows = "".join(f"{i} {(i * 7919) % 100003}\n" for i in range(60000)).encode()
    mtx = b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n"
    cases = {
        "cut.txt.gz": gzip.compress(rows)[:-5000],  # a download that stopped early
        "cut.txt.bz2": bz2.compress(rows)[:-5000],
        "plain.txt.gz": rows[:100],  # not compressed at all
        "cut.mtx.gz": gzip.compress(mtx)[:30],
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        kind = "bzip2" if name.endswith("bz2") else "gzip"
        for engine in ("pyarrow", "pandas"):
            with pytest.raises(GraphFormatError, match=rf"{name}: expected {kind}-compressed text, but"):
                read_edgelist(tmp_path / name, engine=engine)
    with pytest.raises(GraphFormatError, match=r"cut\.txt\.gz: expected gzip"):  # as dataset ingestion reads
        graphs.read.read_edge_columns(str(tmp_path / "cut.txt.gz"))
    (tmp_path / "whole.txt.gz").write_bytes(gzip.compress(rows))
    assert read_edgelist(tmp_path / "whole.txt.gz").m == 60000


def test_whole_file_errors(tmp_path):
    with pytest.raises(GraphFormatError, match="empty file"):
        read_edgelist(write(tmp_path, "empty.txt", ""))
    with pytest.raises(GraphFormatError, match="only comments"):
        read_edgelist(write(tmp_path, "comments.txt", "# a\n# b\n\n"))
    with pytest.raises(GraphFormatError, match=r"expected 3 entries .* found 2"):
        read_edgelist(
            write(
                tmp_path, "short.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 2\n2 3\n"
            )
        )
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_edgelist(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="engine"):
        read_edgelist(write(tmp_path, "ok.txt", "1 2\n"), engine="spark")


def test_cudf_engine_without_cudf_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(graphs.read, "has_cudf", lambda: False)
    with pytest.raises(ImportError, match="cuDF"):
        read_edgelist(write(tmp_path, "ok.txt", "1 2\n"), engine="cudf")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-50, 10**12), st.integers(-50, 10**12), st.floats(0, 1e6)),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from(["\t", " ", ","]),
    st.booleans(),
)
def test_round_trip_through_text_equals_from_edges(tmp_path_factory, edges, sep, crlf):
    path = tmp_path_factory.mktemp("h") / ("e.csv" if sep == "," else "e.txt")
    eol = "\r\n" if crlf else "\n"
    path.write_bytes(
        ("# header" + eol + "".join(f"{a}{sep}{b}{sep}{w!r}{eol}" for a, b, w in edges)).encode()
    )
    g = read_edgelist(path, weighted=True)
    src, dst, w = (np.array(c) for c in zip(*edges, strict=True))
    assert g.token == graphs.from_edges(src, dst, w).token


# Node and edge-line counts from ../shared/datasets/README.md (self-loops included).
SNAP_COUNTS = {
    "soc-Epinions1": (75_879, 508_837),
    "soc-Slashdot0902": (82_168, 948_464),
    "wiki-Vote": (7_115, 103_689),
    "email-Enron": (36_692, 367_662),
    "ca-GrQc": (5_242, 28_980),
    "ca-HepTh": (9_877, 51_971),
    "ca-HepPh": (12_008, 237_010),
    "ca-CondMat": (23_133, 186_936),
}


@pytest.mark.parametrize("name", sorted(SNAP_COUNTS))
def test_snap_datasets_counts(name):
    path = dataset_path(f"{name}.txt.gz")
    if path is None:
        pytest.skip("datasets folder absent")
    g = read_edgelist(path)
    assert (g.n, g.m) == SNAP_COUNTS[name]
    # every undirected SNAP file lists each edge both ways: symmetric as read
    if name.startswith(("ca-", "email-")):
        a = g.to_scipy()
        assert (a != a.T).nnz == 0


@pytest.mark.parametrize("name", ["bom.txt", "bom.csv", "bom.txt.gz"])
def test_a_utf8_byte_order_mark_is_not_part_of_the_first_label(tmp_path, name):
    text = "\ufeff" + ("1,2\n2,3\n3,1\n" if ".csv" in name else "1 2\n2 3\n3 1\n")
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    g = graphs.read_edgelist(path)
    assert g.ids.dtype.kind == "i" and sorted(g.ids.tolist()) == [1, 2, 3] and g.m == 3


@pytest.mark.parametrize("first", ["a 1", "a b 0.5"])
def test_a_first_line_neither_header_nor_like_the_rest_is_refused(tmp_path, first):
    path = tmp_path / "e.txt"
    path.write_text(f"{first}\n2 3 1\n3 1 1\n")
    with pytest.raises(
        graphs.GraphFormatError, match=r"e\.txt, line 1: expected a header line \(a name for every column\)"
    ):
        graphs.read_edgelist(path)
    g = graphs.read_edgelist(path, header=False)  # asked for: every label as text
    assert g.ids.dtype == object and "a" in g.ids.tolist()
    path.write_text("src dst w\n2 3 1\n3 1 1\n")  # a header: every field a name
    assert graphs.read_edgelist(path).ids.dtype.kind == "i"


@pytest.mark.parametrize("first", ["1,2", "name"])
def test_a_first_line_with_fewer_fields_than_the_edge_ends_is_not_a_header(tmp_path, first):
    path = tmp_path / "e.txt"
    path.write_text(f"{first}\n2 3\n3 1\n")  # once read as a header, '1,2' was dropped without a word
    with pytest.raises(graphs.GraphFormatError, match=rf"e\.txt, line 1: .* got '{first}'"):
        graphs.read_edgelist(path)


def test_parquet_columns_named_as_edge_ends_are_taken_by_name(tmp_path):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"w": [0.5, 0.5], "dst": [2, 3], "src": [1, 2]}), path)  # not in that order
    g = graphs.read_edgelist(path)
    src, dst = g.edges()[:2]
    assert sorted(zip(g.ids[src].tolist(), g.ids[dst].tolist(), strict=True)) == [(1, 2), (2, 3)]
    with pytest.raises(
        GraphFormatError, match=r"expected a column named 'from', the file has \['w', 'dst', 'src'\]"
    ):
        graphs.read_edgelist(path, src_col="from", dst_col="to")


def test_cli_src_and_dst_columns_by_name_and_a_missing_name_is_one_line(tmp_path, capsys):
    from pipelines.cli import main

    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"a": [7, 7], "b": [1, 2], "c": [2, 3]}), path)
    base = ["pagerank", str(path), "--workdir", str(tmp_path / "wd"), "--quiet"]
    assert main([*base, "--src-col", "b", "--dst-col", "c", "--out", str(tmp_path / "o.parquet")]) == 0
    assert sorted(pq.read_table(tmp_path / "o.parquet").column("vertex").to_pylist()) == [1, 2, 3]
    assert main([*base, "--src-col", "src", "--dst-col", "c", "--out", str(tmp_path / "p.parquet")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"graphjobs: error: {path}: expected a column named 'src', the file has ['a', 'b', 'c']"]
