"""save/load: round trips, atomic writes, checksums, format versions, memory mapping."""

from __future__ import annotations

import json

import numpy as np
import pytest

import graphs
from graphs import GraphFormatError
from graphs._device import to_host
from tests.conftest import DEVICES


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "make",
    [
        lambda: graphs.rmat(8, seed=1, device="cpu", weighted=True),
        graphs.toy.labeled,
        lambda: graphs.from_edges(np.array([10, 20]), np.array([20, 30]), directed=False),
    ],
)
def test_round_trip(tmp_path, make, device):
    g = make().to(device)
    g.save(tmp_path / "g")
    h = graphs.load(tmp_path / "g", device=device)
    assert h.device == device and h.token == g.token
    assert (h.n, h.m, h.directed, h.weighted) == (g.n, g.m, g.directed, g.weighted)
    assert h.ids.tolist() == g.ids.tolist()
    np.testing.assert_array_equal(to_host(h.indices), to_host(g.indices))
    # the token saved is the content's: recomputing from the loaded arrays agrees
    fresh = graphs.CSRGraph(
        to_host(h.indptr),
        to_host(h.indices),
        to_host(h.weights),
        directed=h.directed,
        ids=h.ids if g.has_labels else None,
    )
    assert fresh.token == g.token


def test_mmap_and_no_overwrite_by_default(tmp_path):
    g = graphs.rmat(8, seed=2, device="cpu")
    g.save(tmp_path / "g")
    h = graphs.load(tmp_path / "g", mmap=True)
    assert isinstance(h.indices.base, np.memmap) and h.token == g.token  # a view of the mapping
    with pytest.raises(FileExistsError, match="overwrite=True"):
        g.save(tmp_path / "g")
    other = graphs.rmat(8, seed=3, device="cpu")
    other.save(tmp_path / "g", overwrite=True)
    assert graphs.load(tmp_path / "g").token == other.token
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]  # no temporary folders left


def test_failed_save_leaves_nothing(tmp_path):
    g = graphs.from_edges(np.array(["a", 1], dtype=object), np.array([1, "b"], dtype=object))
    with pytest.raises(ValueError, match="mixed types"):
        g.save(tmp_path / "g")
    assert list(tmp_path.iterdir()) == []


def test_damage_is_detected(tmp_path):
    g = graphs.rmat(8, seed=4, device="cpu")
    g.save(tmp_path / "g")
    data = bytearray((tmp_path / "g" / "indices.npy").read_bytes())
    data[-1] ^= 0xFF
    (tmp_path / "g" / "indices.npy").write_bytes(bytes(data))
    with pytest.raises(GraphFormatError, match=r"indices\.npy: checksum mismatch"):
        graphs.load(tmp_path / "g")
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    meta["version"] = 99
    (tmp_path / "g" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(GraphFormatError, match="format version 1, got 99"):
        graphs.load(tmp_path / "g")
    with pytest.raises(GraphFormatError, match=r"meta\.json"):
        graphs.load(tmp_path)


def test_a_truncated_array_or_broken_metadata_names_the_file(tmp_path):
    import os

    g = graphs.rmat(10, seed=0)
    g.save(tmp_path / "g")
    f = tmp_path / "g" / "indices.npy"
    os.truncate(f, f.stat().st_size // 2)
    for verify in (False, True):  # what workers do (no checksums), and the checked load
        with pytest.raises(
            graphs.IntegrityError, match=r"indices\.npy: (expected a NumPy array file|checksum)"
        ):
            graphs.load(tmp_path / "g", verify=verify)
    graphs.partition(g, 2).save(tmp_path / "p")
    (tmp_path / "p" / "meta.json").write_text('{"format":\n')
    with pytest.raises(
        graphs.IntegrityError, match=r"p/meta\.json, line 2: expected JSON metadata: Expecting value"
    ):
        graphs.load_partitioned(tmp_path / "p")


@pytest.mark.parametrize("edit", [("directed", False), ("token", "0" * 32), ("n", 257)])
def test_an_edited_metadata_field_is_a_checksum_mismatch_naming_meta_json(tmp_path, edit):
    """meta.json holds its own checksum: an edited field is refused, never loaded as a different graph."""
    g = graphs.rmat(8, seed=4, device="cpu")
    g.save(tmp_path / "g")
    meta_file = tmp_path / "g" / "meta.json"
    clean = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**clean, edit[0]: edit[1]}))
    with pytest.raises(graphs.IntegrityError, match=r"meta\.json: checksum mismatch: the graph's metadata"):
        graphs.load(tmp_path / "g")
    meta = {k: v for k, v in clean.items() if k != "checksum"}  # saved before meta.json held its checksum
    meta_file.write_text(json.dumps(meta))
    assert graphs.load(tmp_path / "g").token == g.token
    del meta["checksums"]
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(graphs.IntegrityError, match=r"meta\.json: expected the graph's checksums"):
        graphs.load(tmp_path / "g")


@pytest.mark.parametrize("name", ["indptr", "indices"])
def test_arrays_no_graph_has_name_their_file_when_checksums_were_skipped(tmp_path, name):
    """A worker's load (verify=False) of arrays damaged into no CSR graph: an IntegrityError naming the
    file (its checksum, checked then), not a ValueError of the constructor."""
    g = graphs.rmat(8, seed=4, device="cpu")
    g.save(tmp_path / "g")
    f = tmp_path / "g" / f"{name}.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(graphs.IntegrityError, match=rf"{name}\.npy: checksum mismatch"):
        graphs.load(tmp_path / "g", verify=False)
