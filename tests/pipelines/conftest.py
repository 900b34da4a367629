"""Fixtures of the pipeline tests."""

from __future__ import annotations

import dask
import pytest


@pytest.fixture
def sync():
    """Dask's synchronous scheduler: job graphs run in this process, in order."""
    with dask.config.set(scheduler="sync"):
        yield
