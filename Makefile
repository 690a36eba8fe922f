# Every set-up step lives here, so a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit demo bench clean compiled test-compiled test-pure wheel test-long \
	docs docs-serve docs-check

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The suite runs what the wheels ship: the compiled build (XDSCLIENT_REQUIRE_COMPILED=1 fails a
# test if it did not load); `make test-pure` runs it as Python.
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
unit: $(STAMP) compiled
	XDSCLIENT_REQUIRE_COMPILED=1 $(BIN)/pytest -n $(WORKERS)

# The property-based and fuzz tests with their full budgets (`make test` runs a fifth of each;
# tests/fuzz.py). CI runs both.
PROPERTIES := tests/reliability/test_fuzz.py tests/resources tests/protocol/test_stateful.py \
	tests/test_dependencies.py tests/shell/test_authorities.py
test-long: $(STAMP)
	XDSCLIENT_FUZZ=long $(BIN)/pytest -q $(PROPERTIES)

# The compiled build (what the wheels ship): mypyc compiles the hot modules of the EDS update path,
# which Python then imports instead of their sources. The list is pyproject.toml's mypyc build hook
# (xdsclient/_compiled.py names the same modules). `make compiled` builds them in place, in a copy
# of the package: setuptools, which mypyc drives, must not read our pyproject.toml (hatchling's).
# Needs a C compiler and Python's headers; it runs again only when one of them changed.
MYPYC_HOOK := ['tool']['hatch']['build']['targets']['wheel']['hooks']['mypyc']['include']
COMPILED_SOURCES := $(shell $(PYTHON) -c "import tomllib; \
	print(' '.join(p.lstrip('/') for p in tomllib.load(open('pyproject.toml', 'rb'))$(MYPYC_HOOK)))")
COMPILED_STAMP := $(VENV)/.compiled
MYPYC_BUILD := build/mypyc

compiled: $(COMPILED_STAMP)

$(COMPILED_STAMP): $(STAMP) $(COMPILED_SOURCES) pyproject.toml
	find xdsclient -name '*.so' -delete && rm -f *__mypyc.*.so
	rm -rf $(MYPYC_BUILD) && mkdir -p $(MYPYC_BUILD) && cp -r xdsclient $(MYPYC_BUILD)/
	cd $(MYPYC_BUILD) && $(abspath $(BIN))/mypyc $(COMPILED_SOURCES) >/dev/null
	cd $(MYPYC_BUILD) && find . -name '*.so' -not -path './build/*' -exec cp --parents {} $(CURDIR) \;
	rm -rf $(MYPYC_BUILD)
	touch $(COMPILED_STAMP)

# The compiled wheel (the sdist stays pure Python): into dist/.
wheel: $(STAMP)
	HATCH_BUILD_HOOK_ENABLE_MYPYC=true $(BIN)/python -m pip wheel -q --no-deps -w dist .

# The pure-Python path: the whole suite again with every module from its source (CI runs both).
test-pure: $(STAMP)
	XDSCLIENT_PURE=1 $(BIN)/pytest -n $(WORKERS)

# A quick check of the compiled build alone: the tests of the modules it compiles.
test-compiled: compiled
	XDSCLIENT_REQUIRE_COMPILED=1 $(BIN)/pytest -q tests/resources tests/protocol \
		tests/test_dependencies.py tests/test_compiled.py

demo: $(STAMP)
	$(BIN)/python -m xdsclient demo $(ARGS)

bench: $(STAMP) compiled
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
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist
	find xdsclient -name '*.so' -delete && rm -f *__mypyc.*.so
