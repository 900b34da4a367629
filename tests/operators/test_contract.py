"""One contract for every operator: shape, dtype, finite non-negative values, original labels.

Each entry maps a name to a call on a graph; new operators add themselves here.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphs
from graphs._device import to_host
from operators import build_ppr_index, influence_maximization, pagerank, ppr, simrank
from tests.conftest import DEVICES

OPERATORS = {
    "pagerank": lambda g: pagerank(g),
    "pagerank-push": lambda g: pagerank(g, method="push"),
    "pagerank-personalized": lambda g: pagerank(g, personalization={0: 1.0, 7: 2.0}),  # by label
    "ppr-hybrid": lambda g: ppr(g, [7], method="hybrid", tol=1e-9)[0],
    "ppr-auto": lambda g: ppr(g, [7], tol=1e-12)[0],  # powerpush on the CPU: in id order, within tol
    "ppr-pull": lambda g: ppr(g, [7], method="pull", tol=1e-9)[0],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(OPERATORS))
@pytest.mark.filterwarnings("ignore:ppr follows out-edges uniformly")  # the graph is weighted on purpose
def test_operator_contract(name, device):
    g = graphs.rmat(9, seed=4, device="cpu", weighted=True)
    out = to_host(OPERATORS[name](g.to(device)))
    assert out.shape == (g.n,) and out.dtype.kind == "f"
    assert np.isfinite(out).all() and (out >= 0).all()
    # results follow the original labels: renumbering the vertices permutes the output alike
    r = graphs.reorder(g)
    moved = dict(zip(r.ids.tolist(), to_host(OPERATORS[name](r.to(device))).tolist(), strict=True))
    tol = 1e-6 if device == "gpu" else 1e-12
    np.testing.assert_allclose([moved[k] for k in g.ids.tolist()], out, atol=tol)


INF = float("inf")
BAD_OPTIONS = {  # options that cannot hold: each is refused by name before any work
    "pagerank tol=inf": (lambda g: pagerank(g, tol=INF), "tol must be a positive number"),
    "ppr tol=inf": (lambda g: ppr(g, [7], tol=INF), "tol must be a positive number"),
    "index epsilon=inf": (lambda g: build_ppr_index(g, epsilon=INF), "epsilon must be a positive number"),
    "index budget=inf": (lambda g: build_ppr_index(g, budget=INF), "budget must be a positive number"),
    "index delta_min=0": (lambda g: build_ppr_index(g, delta_min=0.0), r"delta_min must be in \(0, 1\]"),
    "influence epsilon=inf": (lambda g: influence_maximization(g, k=2, epsilon=INF), "epsilon must be a"),
    "influence ell=inf": (lambda g: influence_maximization(g, k=2, ell=INF), "ell must be a positive number"),
    "simrank epsilon=nan": (lambda g: simrank(g, 7, epsilon=float("nan")), "epsilon must be"),
}


@pytest.mark.parametrize("name", sorted(BAD_OPTIONS))
def test_impossible_options_are_refused_by_name(name):
    call, message = BAD_OPTIONS[name]
    with pytest.raises(ValueError, match=message):
        call(graphs.rmat(7, seed=4, device="cpu"))
