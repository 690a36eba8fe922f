# Every set-up step lives here, so a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit demo bench clean

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

demo: $(STAMP)
	$(BIN)/python -m xdsclient demo $(ARGS)

bench: $(STAMP)
	$(BIN)/python bench/core.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
