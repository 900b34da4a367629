"""Every public operator and reader documents its use in an ``Examples`` section, and the examples run."""

from __future__ import annotations

import doctest

import pytest

import graphjobs

PUBLIC = [
    "pagerank",
    "ppr",
    "build_ppr_index",
    "topk_ppr",
    "influence_maximization",
    "influence_spread",
    "simrank",
    "simrank_topk",
    "read_edgelist",
    "from_edges",
    "from_pandas",
]


@pytest.mark.parametrize("name", PUBLIC)
def test_the_docstring_has_examples_that_run(name):
    fn = getattr(graphjobs, name)
    assert "\n    Examples\n    --------\n" in fn.__doc__, f"{name} has no Examples section"
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    tests = finder.find(fn, name, globs={})
    assert tests and tests[0].examples
    for test in tests:
        runner.run(test)
    assert runner.failures == 0 and runner.tries >= 3
