"""Device memory of the operators (their GPU paths; the index build and SimRank on either device),
estimated from the graph's size and the options before anything is allocated, and checked against what
is free.

Each estimate is the peak of the bytes CuPy's pool hands out at once, from the graph's arrival on the
device to the end of the computation (what ``benchmarks/memory.py`` measures beside it). Its terms:

- a graph: its row pointer (8 bytes a vertex) and column indices (4 bytes an edge; 8 from 2**31
  vertices), float32 weights where kept;
- a CSR build on the GPU (a transpose, a renumbering, a simplified copy): the 64-bit edge keys, the
  radix sort's temporary of the same size and the 32-bit rows they are made from, 20 bytes an edge,
  while the graph it reads is still held;
- the computation's own arrays (PageRank's vectors, a PPR batch's iterates).
"""

from __future__ import annotations

from dataclasses import dataclass

from graphs._device import free_memory
from operators.errors import InsufficientMemoryError

BUILD_BYTES_PER_EDGE = 20  # key (8) + the sort's temporary (8) + rows (4)
SHARE = 0.9  # of the free memory an estimate may take


def graph_bytes(n: int, m: int, *, weighted: bool = False) -> int:
    """Bytes of a CSR graph's arrays: int64 row pointer, int32 (int64 from 2**31 vertices) columns,
    float32 weights."""
    index = 4 if n < 2**31 else 8
    return 8 * (n + 1) + (index + (4 if weighted else 0)) * m


def build_bytes(n: int, m: int) -> int:
    """The transient of one CSR build of ``m`` edges on the GPU (sort keys, the sort's temporary, rows,
    the new row pointer)."""
    return BUILD_BYTES_PER_EDGE * m + 8 * (n + 1)


@dataclass(frozen=True)
class MemoryEstimate:
    """``parts``: named byte counts that are held at the peak together (``bytes``, their sum) on
    ``device``; ``what`` says what is estimated, for messages; ``held``: the names of the parts that are
    allocated already when it is made (the graph a computation runs on), which the free memory
    excludes."""

    what: str
    device: str
    parts: tuple[tuple[str, int], ...]
    held: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return int(sum(b for _, b in self.parts))

    def check(self, hint: str) -> dict:
        """The estimate beside the device's free memory (the host's available memory for 'cpu';
        ``$GRAPHJOBS_MEMORY_LIMIT`` applied), as a record {"estimate_bytes", "free_bytes", "device",
        "parts"}; ``InsufficientMemoryError`` naming ``hint`` (what would fit) when the parts not yet
        allocated (all but ``held``) take more than 90% of it."""
        free = free_memory(self.device)
        unheld = int(sum(b for name, b in self.parts if name not in self.held))
        if unheld > SHARE * free:
            where = "the GPU" if self.device == "gpu" else "the host"
            raise InsufficientMemoryError(f"{self.what} on {where}", unheld, free, hint)
        return {
            "estimate_bytes": self.bytes,
            "free_bytes": int(free),
            "device": self.device,
            "parts": dict(self.parts),
        }


def pagerank_estimate(n: int, m: int, *, weighted: bool, device: str = "gpu") -> MemoryEstimate:
    """Global PageRank on one device: the graph, its transpose, and the larger of the layout's build (the
    transpose's and the binned layout's keys, 20 bytes an edge, freed before iterating) and the value
    vectors (float32 on the GPU)."""
    g = graph_bytes(n, m, weighted=weighted)
    value = 4 if device == "gpu" else 8
    return MemoryEstimate(
        f"PageRank of n={n:,}, m={m:,}",
        device,
        (
            ("graph", g),
            ("transpose", g),
            ("layout build or vectors", max(build_bytes(n, m), n * (4 * value + 16))),
        ),
    )


def ppr_power_estimate(n: int, m: int, batch: int) -> MemoryEstimate:
    """GPU power iteration of ``batch`` sources at once: the graph, its transpose (its build is the peak
    for small batches) and, in the float64 phase, four n x batch iterates (x, its scaled copy and the
    next two) of 8 bytes."""
    g = graph_bytes(n, m)
    iterates = 4 * 8 * n * max(batch, 1)
    return MemoryEstimate(
        f"PPR by power iteration of {batch} source(s) at once, n={n:,}, m={m:,}",
        "gpu",
        (("graph", g), ("transpose", g), ("transpose build or iterates", max(build_bytes(n, m), iterates))),
    )


def simrank_estimate(n: int, m: int, levels: int, device: str = "gpu") -> MemoryEstimate:
    """Single-source SimRank (``operators.simrank``, ``levels`` = L hops) on ``device``: the graph, its
    simplified copy (no self-loops or repeated edges), and the larger of that copy's build (its edge
    rows and the dedupe's mask beside the build) and what a query holds after it: the copy's transpose,
    the L + 1 hop vectors and four more vectors of n (their sum, the allocation, in-degrees, Horner's
    iterate), float64."""
    g = graph_bytes(n, m)
    query = g + 8 * n * (levels + 5)
    return MemoryEstimate(
        f"SimRank of n={n:,}, m={m:,} ({levels} hops)",
        device,
        (("graph", g), ("simplified copy", g), ("its build, or a query", max(build_bytes(n, m) + m, query))),
    )
