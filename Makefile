# graphjobs: `make demo` and `make test` work on a fresh clone (they create .venv first).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXTRAS ?= test,dev,docs
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
SRC    := graphjobs graphs operators pipelines cluster benchmarks tests docs/_hooks.py
# Numba's on-disk cache lives in the venv so repeated runs (and CI re-runs) skip compilation.
export NUMBA_CACHE_DIR ?= $(CURDIR)/$(VENV)/numba-cache

.PHONY: setup demo test nx-tests lint docs bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[$(EXTRAS)]"
	touch $@

demo: setup
	$(BIN)/graphjobs demo

lint: setup
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

test: setup lint
	$(BIN)/python -m pytest -q

# The documentation site (MkDocs, API pages from the docstrings) into site/; any warning fails it.
docs: setup
	$(BIN)/mkdocs build --strict --quiet

# NetworkX's own PageRank and similarity tests with graphjobs as their backend (also run by `make test`)
nx-tests: setup
	$(BIN)/python -m pytest -q tests/test_nx_backend.py -k networkx_own_tests

bench: setup
	$(BIN)/python -m benchmarks.run --device cpu --out bench-cpu.jsonl

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .graphjobs site
