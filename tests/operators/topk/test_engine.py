"""The GPU top-k query is an engine built from parts that own their buffers (``operators.topk.gpu``):
checked statically, on the CPU, from the modules' syntax trees (the parts' buffers need a GPU), and
with a GPU, closed as a context manager and by ``forget_workspaces``.

The static check: in every class of the package and every function whose parameters are annotated with
one, an attribute read of an object of a known class (``self``, a part held by ``self``, a parameter,
or a local name bound to one) is an attribute that the class's ``__init__`` assigns, or a method,
property or class-level name of it; attributes are assigned outside ``__init__`` only where it created
them; no class aliases a function as a method, and nothing writes through ``__dict__`` or
``object.__setattr__``.
"""

from __future__ import annotations

import ast
import importlib
import math
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import operators.topk.gpu as gpu_package
from operators import build_ppr_index, topk_ppr
from operators.topk.cache import QueryCache
from tests.operators.topk.test_topk_ppr import _sources

GPU_DIR = Path(gpu_package.__file__).parent
MAX_ENGINE_ATTRIBUTES = (
    18  # GPUQuery's own: its parts, its event, the launch settings and the query's progress
)
PARTS = {"RoundParams", "PushState", "Candidates", "RoundTops", "Refinement", "GraphReplay"}


@dataclass
class ClassInfo:
    name: str
    module: str
    node: ast.ClassDef
    attrs: set = field(default_factory=set)  # assigned in __init__
    members: set = field(default_factory=set)  # methods, properties, class-level names
    types: dict = field(default_factory=dict)  # attribute -> class name, where known


def _targets(node):
    """The (object, attribute) pairs an assignment stores to, through tuples."""
    targets = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
    out = []
    while targets:
        t = targets.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            targets.extend(t.elts)
        elif isinstance(t, ast.Attribute):
            out.append(t)
    return out


def _annotation(arg):
    a = arg.annotation
    if isinstance(a, ast.Name):
        return a.id
    if isinstance(a, ast.Constant) and isinstance(a.value, str):
        return a.value
    return None


def collect(sources: dict[str, str]) -> dict[str, ClassInfo]:
    """Every class of ``sources`` (module name -> text), with what its ``__init__`` assigns."""
    classes = {}
    for module, text in sources.items():
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = ClassInfo(node.name, module, node)
    for info in classes.values():
        for item in info.node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                info.members.add(item.name)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                info.members.update(t.id for t in targets if isinstance(t, ast.Name))
        init = next(
            (f for f in info.node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
        )
        if init is None:
            continue
        params = {a.arg: _annotation(a) for a in init.args.args + init.args.kwonlyargs}
        for node in ast.walk(init):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            for t in _targets(node):
                if isinstance(t.value, ast.Name) and t.value.id == "self":
                    info.attrs.add(t.attr)
                    v, hint = node.value, getattr(node, "annotation", None)
                    if isinstance(hint, ast.BinOp):  # X | None
                        hint = hint.left
                    if isinstance(hint, ast.Name) and hint.id in classes:
                        info.types[t.attr] = hint.id
                    elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in classes:
                        info.types[t.attr] = v.func.id
                    elif isinstance(v, ast.Name) and params.get(v.id) in classes:
                        info.types[t.attr] = params[v.id]
    return classes


def _functions(tree):
    """(class or None, function) for every module-level function and method."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.name, item


def check(sources: dict[str, str]) -> list[str]:
    """The static check of the module text: a list of problems (empty: it passes)."""
    classes = collect(sources)
    problems = []

    def type_of(expr, env):
        if isinstance(expr, ast.Name):
            return env.get(expr.id)
        if isinstance(expr, ast.Attribute):
            owner = type_of(expr.value, env)
            return classes[owner].types.get(expr.attr) if owner in classes else None
        return None

    for module, text in sources.items():
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "__dict__":
                problems.append(f"{module}:{node.lineno}: reads or writes __dict__")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__setattr__"
            ):
                problems.append(f"{module}:{node.lineno}: __setattr__ call")
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.Assign) and isinstance(item.value, (ast.Name, ast.Attribute)):
                        problems.append(f"{module}:{item.lineno}: {node.name} aliases a function as a method")
        for cls, fn in _functions(tree):
            env = {}
            if cls is not None and fn.args.args:
                env[fn.args.args[0].arg] = cls
            for node in ast.walk(fn):  # nested functions' annotated parameters too
                if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                    for a in node.args.args + node.args.kwonlyargs:
                        if getattr(a, "annotation", None) is not None and _annotation(a) in classes:
                            env[a.arg] = _annotation(a)
            for _ in range(3):  # local names bound to known objects (p = self.push_state; c, p = ...)
                for node in ast.walk(fn):
                    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                        continue
                    t, v = node.targets[0], node.value
                    pairs = [(t, v)]
                    if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts):
                        pairs = list(zip(t.elts, v.elts, strict=True))
                    for name, value in pairs:
                        kind = type_of(value, env)
                        if isinstance(name, ast.Name) and kind is not None:
                            env[name.id] = kind
            stored = set()
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    stored.update(id(t) for t in _targets(node))
            where = f"{module}:{cls + '.' if cls else ''}{fn.name}"
            for node in ast.walk(fn):
                if not isinstance(node, ast.Attribute):
                    continue
                owner = type_of(node.value, env)
                if owner not in classes or node.attr.startswith("__"):  # (__dict__: above)
                    continue
                info = classes[owner]
                if id(node) in stored:
                    if fn.name == "__init__" and cls == owner and isinstance(node.value, ast.Name):
                        continue
                    if node.attr not in info.attrs:
                        problems.append(f"{where}:{node.lineno}: creates {owner}.{node.attr} after __init__")
                elif node.attr not in info.attrs | info.members:
                    problems.append(
                        f"{where}:{node.lineno}: reads {owner}.{node.attr}, never assigned by __init__"
                    )
    return problems


def _package_sources() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(GPU_DIR.glob("*.py"))}


def test_gpu_modules_import_without_cupy():
    """Every module of the GPU path imports on a machine without CuPy (CuPy is imported lazily)."""
    for info in pkgutil.iter_modules([str(GPU_DIR)]):
        importlib.import_module(f"operators.topk.gpu.{info.name}")


def test_attribute_ownership_static_check_passes():
    assert check(_package_sources()) == []


def test_static_check_finds_what_it_is_for():
    """Planted faults: a read of a part's attribute that its ``__init__`` never assigns (through a local
    name and through a chain), one created later, a method glued on by aliasing and a ``__dict__``
    write; and the engine's own reads."""
    text = """
class Push:
    def __init__(self, n):
        self.r = n
        self.counts = n

    def close(self):
        self.r = self.counts = None


class Cands:
    def __init__(self, push: Push):
        self.push = push
        self.ids = None

    def launch(self):
        p = self.push
        return p.r, p.touched, self.push.seen


class Engine:
    def __init__(self, n):
        self.push = Push(n)
        self.cands = Cands(self.push)

    def start(self):
        self.s = 0
        self.__dict__["x"] = 1
        return self.cands.push.r, self.cands.ids, self.cands.est

    finish = Cands.launch


def free(c: Cands):
    return c.push.counts, c.push.stats
"""
    got = "\n".join(check({"planted": text}))
    for fault in (
        "Cands.launch:18: reads Push.touched",
        "Cands.launch:18: reads Push.seen",
        "Engine.start:27: creates Engine.s after __init__",
        "planted:28: reads or writes __dict__",
        "Engine.start:29: reads Cands.est",
        "planted:31: Engine aliases a function as a method",
        "planted:free:35: reads Push.stats",
    ):
        assert fault in got, (fault, got)
    assert "Push.r" not in got and "Push.counts" not in got and "Cands.ids" not in got
    assert len(got.splitlines()) == 7


def test_gpu_query_is_an_engine_of_parts():
    """``GPUQuery`` is a context manager with ``close()``; its own attributes are few (it had 53, then
    most of them buffers); its parts are the classes below, each with ``close()``, each in the module of
    its concept."""
    classes = collect(_package_sources())
    engine = classes["GPUQuery"]
    assert {"__enter__", "__exit__", "close"} <= engine.members
    assert len(engine.attrs) <= MAX_ENGINE_ATTRIBUTES, sorted(engine.attrs)
    assert set(engine.types.values()) == PARTS
    homes = {"RoundParams": "push", "PushState": "push", "Candidates": "bound", "RoundTops": "select"}
    homes |= {"Refinement": "refine", "GraphReplay": "graph"}
    for name in PARTS:
        assert "close" in classes[name].members, name
        assert classes[name].module == homes[name]
    # every buffer of a part is created by its own __init__, and none of the engine's is an array
    assert not engine.attrs & {"state", "pi0", "touched", "ids", "est", "est_h", "qp", "graphs", "round_tops"}


class _Closing:
    def __init__(self):
        self.closed = 0

    def close(self):
        self.closed += 1


def test_forgotten_workspaces_are_closed():
    """``QueryCache.clear`` (``forget_workspaces``) closes what it keeps that can be: each thread's
    workspace and the stream pool; others (a lock, CPU workspaces, host arrays) are dropped as before."""
    cache = QueryCache()
    works, pool, spare = {1: _Closing(), 2: _Closing()}, _Closing(), SimpleNamespace()
    cache.setdefault("workspaces", lambda: works)
    cache.setdefault("stream_pool", lambda: pool)
    cache.setdefault("cpu_spares", lambda: (object(), [spare]))
    cache.setdefault("tie_order", lambda: (np.arange(3), np.arange(3)))
    cache.clear()
    assert [w.closed for w in works.values()] == [1, 1] and pool.closed == 1
    assert "workspaces" not in cache and "stream_pool" not in cache and cache.nbytes == 0


@pytest.mark.gpu
def test_gpu_query_as_a_context_manager_frees_its_buffers(rmat13):
    """A workspace used in a ``with`` block answers alike whether its rounds and refinements run directly,
    are captured or replayed; leaving the block closes it: its parts drop their buffers (their device
    memory returns to the pool), its graphs and capture stream, and a query on it raises a clear error.
    ``forget_workspaces`` closes the index's workspaces too."""
    import cupy as cp

    from operators._gpu.streams import exhaust
    from operators.topk import WORKSPACE_BYTES, _query
    from operators.topk.batch import workspace
    from operators.topk.gpu import GPUQuery
    from operators.topk.gpu.lists import round_constants
    from operators.topk.refine import REFINE_BYTES, in_edges

    idx = build_ppr_index(rmat13.to("gpu"), seed=2)
    n, k = idx.graph.n, 20
    s = int(np.argmax(np.diff(idx.graph.indptr.get())))
    opts = dict(k=k, eps=idx.params.epsilon, delta=1.0 / (10 * k * math.log(n)), max_rounds=10, jump=True)
    opts |= dict(adaptive=True, high_irw=True, tiling=True, persistent=True, ub_walks=idx.omega_i_ub)
    opts["edges"] = in_edges(idx)  # kept with the graph, as the round constants are with the index
    round_constants(idx)
    memory = cp.get_default_memory_pool()
    cp.cuda.Device().synchronize()
    before = memory.used_bytes()
    answers = []
    with GPUQuery(idx) as q:
        q.replay = True  # rounds and refinements as CUDA graphs, as ``topk_ppr``'s queries run them
        for _ in range(3):  # launched directly, then captured, then replayed
            answers.append(exhaust(_query(q, idx, s, key=0, **opts)))
        used = memory.used_bytes()
        assert q.graph_replay.graphs and q.refinement.shared is not None and not q.closed
    # at least the workspace's buffers as query_memory counts them a vertex (on this small graph its
    # fixed-size buffers weigh as much again; benchmarks/memory.py holds the estimate to the peak at scale)
    assert (WORKSPACE_BYTES + REFINE_BYTES) * n <= used - before
    for _, est, stats in answers[1:]:
        np.testing.assert_allclose(est, answers[0][1], rtol=1e-6)
        assert stats[0] == answers[0][2][0]  # rounds
    assert q.closed and q.done is None and q.round is None
    p, c = q.push_state, q.candidates
    assert p.state is None and p.r is None and p.pi0 is None and p.touched is None and p.counts is None
    assert c.ids is None and c.est is None and c.est_h is None and q.params.qp is None
    assert q.tops.by_k is None and q.refinement.shared is None
    assert q.graph_replay.graphs is None and q.graph_replay.capture_stream is None
    assert memory.used_bytes() - before < 8 * n  # every buffer went back to the pool
    with pytest.raises(RuntimeError, match="closed"):
        q.start(s)
    q.close()  # a second close does nothing

    topk_ppr(idx, _sources(rmat13, 6), k=k, streams=2)
    kept = [workspace(idx), *(w for _, w in idx.cache.get("stream_pool")._free)]
    assert len(kept) >= 2 and not any(w.closed for w in kept)
    idx.forget_workspaces()
    assert all(w.closed for w in kept)
    assert not workspace(idx).closed  # a new one
