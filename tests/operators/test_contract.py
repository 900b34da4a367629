"""One contract for every operator: shape, dtype, finite non-negative values, original labels.

Each entry maps a name to a call on a graph; new operators add themselves here.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphs
from graphs._device import to_host
from operators import pagerank, ppr
from tests.conftest import DEVICES

OPERATORS = {
    "pagerank": lambda g: pagerank(g),
    "pagerank-push": lambda g: pagerank(g, method="push"),
    "pagerank-personalized": lambda g: pagerank(g, personalization={0: 1.0, 7: 2.0}),  # by label
    "ppr-hybrid": lambda g: ppr(g, [7], tol=1e-9)[0],
    "ppr-pull": lambda g: ppr(g, [7], method="pull", tol=1e-9)[0],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(OPERATORS))
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
