# Every set-up step lives here, so a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit demo bench clean compiled test-compiled test-long docs docs-serve docs-check

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

# Three workers on two cores: most tests wait on real sockets and servers, so the suite takes
# half the time of one worker (measured: 3:23 against 6:48 on a loaded machine).
WORKERS ?= 3
unit: $(STAMP)
	$(BIN)/pytest -n $(WORKERS)

# The property-based and fuzz tests with their full budgets (`make test` runs a fifth of each;
# tests/fuzz.py). CI runs both.
PROPERTIES := tests/reliability/test_fuzz.py tests/resources tests/protocol/test_stateful.py \
	tests/test_dependencies.py tests/shell/test_authorities.py
test-long: $(STAMP)
	XDSCLIENT_FUZZ=long $(BIN)/pytest -q $(PROPERTIES)

# The optional compiled EDS wire reader (faster decoding of large assignments): mypyc builds it
# beside its source, where it is imported instead of the .py. Needs a C compiler; without it the
# upb path does the same work.
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

# The documentation site: MkDocs with the tools of the `docs` extra, into build/site.
DOCS_STAMP := $(VENV)/.installed-docs
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
HOOKS := docs/_hooks

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,docs]'
	touch $(DOCS_STAMP)

# --strict: a warning (a broken link, a missing snippet, an unresolved reference) fails the build.
docs: $(DOCS_STAMP)
	$(BIN)/ruff check $(HOOKS)
	$(BIN)/ruff format --check $(HOOKS)
	$(BIN)/mypy --strict $(HOOKS)
	$(MKDOCS) build --strict

docs-serve: $(DOCS_STAMP)
	$(MKDOCS) serve --strict --dev-addr 127.0.0.1:8000

# The built site in headless Chromium (Debian's chromium and chromium-driver, installed here when
# missing and we are root); with XDSCLIENT_REQUIRE_BROWSER=1 a missing browser fails, not skips.
# The load tester's HTML report (`xdsclient load --html`) is checked in the same browser, under
# the same rules.
docs-check: docs
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -q && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
		else \
			echo "make docs-check: needs chromium and chromium-driver (apt-get install as root)"; \
			exit 1; \
		fi; \
	fi
	XDSCLIENT_REQUIRE_BROWSER=1 $(BIN)/pytest -q tests/docs tests/load/test_html_browser.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build
	rm -f xdsclient/resources/*.so
