# Every set-up step lives here, so a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit demo bench clean compiled test-compiled

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check xdsclient tests bench examples
	$(BIN)/ruff format --check xdsclient tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy --strict xdsclient
	$(BIN)/mypy tests examples bench

unit: $(STAMP)
	$(BIN)/pytest

# The optional compiled EDS wire reader (issue 14): mypyc builds it beside its source, where it is
# imported instead of the .py. Needs a C compiler; without it the upb path does the same work.
WIRE := xdsclient/resources/_endpoint_wire
# It is built in a copy of the package: setuptools, which mypyc drives, must not read our
# pyproject.toml (hatchling's).
compiled: $(STAMP)
	rm -rf build/mypyc && mkdir -p build/mypyc && cp -r xdsclient build/mypyc/
	cd build/mypyc && $(CURDIR)/$(BIN)/mypyc $(WIRE).py
	cp build/mypyc/$(WIRE).*.so build/mypyc/$(WIRE)__mypyc.*.so xdsclient/resources/
	rm -rf build

# Both paths are tested: `make test` runs the interpreted one, this the compiled one.
test-compiled: compiled
	XDSCLIENT_REQUIRE_COMPILED=1 $(BIN)/pytest -q tests/resources tests/protocol tests/test_dependencies.py

demo: $(STAMP)
	$(BIN)/python -m xdsclient demo $(ARGS)

bench: $(STAMP)
	$(BIN)/python bench/core.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build
	rm -f xdsclient/resources/*.so
