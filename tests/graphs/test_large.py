"""Scans and selections over 2**31 elements and more (graphs._large), and a GPU graph of more than 2**31
edges through the CSR build, the transpose and PageRank."""

import numpy as np
import pytest

import graphs
import operators
from graphs import _large
from graphs._device import to_host
from graphs.errors import MissingDependencyError


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 7 elements, so that small arrays take the chunked path."""
    monkeypatch.setattr(_large, "CHUNK", 7)


@pytest.mark.parametrize("size", [0, 1, 7, 8, 20, 21, 50])
@pytest.mark.parametrize("dtype, out", [(np.bool_, None), (np.int8, np.int64), (np.float32, np.float64)])
def test_chunked_cumsum_equals_numpys(small_chunks, size, dtype, out):
    a = (np.random.default_rng(size).random(size) * 5).astype(dtype)
    got = _large.cumsum(a, dtype=out)
    want = np.cumsum(a, dtype=out)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("size", [0, 6, 7, 15, 30])
def test_chunked_compress_equals_mask_indexing(small_chunks, size):
    rng = np.random.default_rng(size)
    a = rng.integers(0, 100, size)
    mask = rng.random(size) < 0.6
    np.testing.assert_array_equal(_large.compress(a, mask), a[mask])


def test_graph_assembly_in_chunks_equals_one_piece(monkeypatch):
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 30, 200), rng.integers(0, 30, 200)
    w = rng.random(200).astype(np.float32)
    options = dict(n=30, renumber=False, directed=False, self_loops=False, dedupe=True)
    whole = graphs.from_edges(src, dst, w, **options)
    monkeypatch.setattr(_large, "CHUNK", 7)
    chunked = graphs.from_edges(src, dst, w, **options)
    for name in ("indptr", "indices", "weights"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(chunked, name))
    pairs = {(min(u, v), max(u, v)) for u, v in zip(src.tolist(), dst.tolist(), strict=True) if u != v}
    assert whole.m == 2 * len(pairs)  # each distinct pair once each way, no self-loop


class _FakeCupy:
    def __init__(self, version):
        self.__version__ = version


@pytest.mark.parametrize(
    "version, refused", [("13.6.0", True), ("14.0.1", True), ("14.1.0", False), ("15.0.0a1", False)]
)
def test_relabelling_two_billion_ids_refuses_a_cupy_that_scans_them_wrongly(version, refused):
    _large.check_unique_size(_FakeCupy(version), 2**31 - 1)  # below: any version
    if refused:
        with pytest.raises(MissingDependencyError, match=f"CuPy >= 14.1 \\(found {version}"):
            _large.check_unique_size(_FakeCupy(version), 2**31)
    else:
        _large.check_unique_size(_FakeCupy(version), 2**31)
    _large.check_unique_size(np, 2**40)


def _free_gpu_bytes():
    from graphs._device import free_memory

    return free_memory("gpu")


@pytest.mark.gpu
def test_scans_and_selections_past_two_billion_elements_on_the_gpu():
    import cupy as cp

    if _free_gpu_bytes() < 40 * 2**30:
        pytest.skip("needs 40 GiB of free GPU memory")
    size = 2**31 + 5
    ones = cp.ones(size, dtype=cp.int8)
    total = _large.cumsum(ones, dtype=cp.int64)
    assert int(total[-1]) == size and int(total[2**30]) == 2**30 + 1 and int(total[2**31]) == 2**31 + 1
    del total
    mask = ones.astype(cp.bool_)
    mask[3] = False
    kept = _large.compress(ones, mask)
    assert kept.size == size - 1
    del kept, mask, ones
    cp.get_default_memory_pool().free_all_blocks()


@pytest.mark.gpu
def test_a_graph_of_more_than_two_billion_edges_transposes_and_ranks_exactly():
    """A circulant graph (each vertex v points to v+1 .. v+d mod n) of n = 2**21 vertices and d = 1,025:
    m = 2,149,580,800 edges, past 2**31, so the last vertices' edges lie beyond any 32-bit offset. Every
    vertex has in- and out-degree d: the transpose's rows are known and PageRank is exactly uniform."""
    import cupy as cp

    if _free_gpu_bytes() < 80 * 2**30:
        pytest.skip("needs 80 GiB of free GPU memory")
    n, d = 2**21, 1025
    m = n * d
    assert m > 2**31
    offsets = cp.arange(1, d + 1, dtype=cp.int64)
    indices = cp.empty(m, dtype=cp.int32)
    block = 2**18
    for v0 in range(0, n, block):
        v = cp.arange(v0, min(v0 + block, n), dtype=cp.int64)
        indices[v0 * d : (v0 + v.size) * d] = ((v[:, None] + offsets[None, :]) % n).ravel().astype(cp.int32)
    indptr = cp.arange(n + 1, dtype=cp.int64) * d
    g = graphs.CSRGraph(indptr, indices, validate=False)
    del indices, indptr

    t = g.transpose()
    np.testing.assert_array_equal(to_host(t.indptr[-3:]), (np.arange(n - 2, n + 1) * d))
    for v in (0, n // 2, n - 1):  # the last row's in-edges sit past 2**31
        want = np.sort((v - np.arange(1, d + 1)) % n)
        np.testing.assert_array_equal(to_host(t.indices[v * d : (v + 1) * d]), want)
    del t
    g.forget_derived()
    cp.get_default_memory_pool().free_all_blocks()

    for method in ("auto", "pull"):
        x = to_host(operators.pagerank(g, method=method, tol=1e-10, dtype=np.float64))
        np.testing.assert_allclose(x * n, 1.0, atol=1e-6, err_msg=method)
        g.forget_derived()
        cp.get_default_memory_pool().free_all_blocks()
