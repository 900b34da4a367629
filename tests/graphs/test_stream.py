"""Streamed reading of a Parquet edge dataset (``graphs.stream``): the same CSR as building it from the
whole edge list, the errors of a bad file, and a host peak far below an edge list's bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import graphs
from graphs.errors import GraphFormatError
from graphs.stream import read_parquet_dataset
from tests.conftest import child_env


def _write(folder: Path, src, dst, w=None, files: int = 3, names=("src", "dst"), group: int = 5) -> Path:
    """The edges split over ``files`` Parquet files (row groups of ``group`` rows) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(np.array_split(np.arange(len(src)), files)):
        cols = {names[0]: np.asarray(src)[part], names[1]: np.asarray(dst)[part]}
        if w is not None:
            cols["weight"] = np.asarray(w, dtype=np.float32)[part]
        pq.write_table(pa.table(cols), folder / f"part-{i:03d}.parquet", row_group_size=group)
    return folder


def _same(a, b):
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    if a.weights is None:
        assert b.weights is None
    else:
        np.testing.assert_array_equal(a.weights, b.weights)
    assert a.directed == b.directed


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize(("dedupe", "self_loops"), [(False, True), (True, False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_csr_equals_the_one_built_from_the_whole_edge_list(
    tmp_path, directed, dedupe, self_loops, weighted
):
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    src[:5], dst[:5] = 7, 7  # self-loops, and a repeated edge
    src[5:9], dst[5:9] = 3, 11
    w = rng.random(300).astype(np.float32) if weighted else None
    folder = _write(tmp_path / "ds", src, dst, w)
    wcol = "weight" if weighted else None
    opts = dict(weight_col=wcol, directed=directed, dedupe=dedupe, self_loops=self_loops)
    got = read_parquet_dataset(folder, batch_rows=7, **opts)
    n = int(max(src.max(), dst.max())) + 1
    want = graphs.from_edges(
        src, dst, w, n=n, renumber=False, directed=directed, dedupe=dedupe, self_loops=self_loops
    )
    _same(got, want)
    assert not got.has_labels and got.n == n
    again = graphs.read_edgelist(folder, **opts)
    _same(again, want)  # read_edgelist reads a folder this way


def test_columns_by_name_and_isolated_ids_up_to_n(tmp_path):
    folder = _write(tmp_path / "ds", [0, 1, 5], [1, 2, 0], files=2, names=("to", "from"))
    g = read_parquet_dataset(folder, src_col="from", dst_col="to", n=9)
    assert g.n == 9 and g.m == 3
    np.testing.assert_array_equal(np.diff(g.indptr), [1, 1, 1, 0, 0, 0, 0, 0, 0])  # 1->0, 2->1, 0->5


@pytest.mark.parametrize(
    ("cols", "message"),
    [
        ({"src": [0, 1, -4], "dst": [1, 2, 0]}, r"part-000.parquet: row 2: expected an id >= 0, got -4"),
        ({"src": [0, 1, None], "dst": [1, 2, 0]}, r"row 2: expected a value in column 'src', got null"),
        ({"src": ["a", "b", "c"], "dst": ["b", "c", "a"]}, r"expected integer vertex ids in 'src'"),
        ({"src": [0, 1, 2], "dst": [1, 2, 0], "weight": [1.0, np.nan, 1.0]}, r"row 1: expected a finite"),
    ],
)
def test_a_bad_file_is_named_with_its_row(tmp_path, cols, message):
    folder = tmp_path / "ds"
    folder.mkdir()
    pq.write_table(pa.table(cols), folder / "part-000.parquet")
    with pytest.raises(GraphFormatError, match=message):
        read_parquet_dataset(folder, weight_col="weight" if "weight" in cols else None)
    with pytest.raises(GraphFormatError, match=r"expected an id in \[0, 2\), got 2"):
        _write(tmp_path / "big", [0, 1, 2], [1, 2, 0], files=1)
        read_parquet_dataset(tmp_path / "big", n=2)


def test_a_folder_holding_other_files_is_refused(tmp_path):
    folder = _write(tmp_path / "ds", [0, 1], [1, 0], files=1)
    (folder / "_SUCCESS").write_text("")  # markers of other writers are left out
    assert read_parquet_dataset(folder).m == 2
    (folder / "notes.txt").write_text("x")
    with pytest.raises(GraphFormatError, match=r"expected only Parquet edge files in the folder"):
        read_parquet_dataset(folder)
    with pytest.raises(GraphFormatError, match=r"found none"):
        (tmp_path / "empty").mkdir()
        read_parquet_dataset(tmp_path / "empty")


PEAK = """
import resource, sys
import numpy as np
import graphs
from graphs.stream import read_parquet_dataset
read_parquet_dataset(sys.argv[1] + "/warm", batch_rows=1 << 16)  # compile first
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
g = read_parquet_dataset(sys.argv[1] + "/ds", batch_rows=1 << 16)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(g.m, (after - before) * 1024)
"""


def test_the_host_peak_stays_far_below_the_edge_lists_bytes(tmp_path):
    """4.2M edges: an int64 edge list is 67 MB and the whole-list build holds about three of it; the
    streamed read's peak grows by less than the CSR (17 MB of int32 indices, 2 MB of row pointers)
    plus a batch and the cursors, well under one edge list."""
    g = graphs.rmat(18, seed=1)
    src, dst, _ = g.edges()
    _write(tmp_path / "ds", src, dst, files=4, group=1 << 16)
    _write(tmp_path / "warm", [0, 1], [1, 0], files=1)
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    m, grew = (int(v) for v in done.stdout.split())
    assert m == g.m
    assert grew < 0.6 * 16 * m, (grew, 16 * m)
