"""Graphs that several operator test modules share."""

from __future__ import annotations

import pytest

import graphs


@pytest.fixture(scope="module")
def rmat13():
    return graphs.rmat(13, seed=11, device="cpu")
