"""The package's layers, as `LAYERS`: which folder (or root module) may import which, checked
for every import of every module, and no import cycle at all.

The package facade is the API, never a dependency of the client: no module of the client
imports a name from ``xdsclient/__init__.py`` (so the facade can import any module without a
cycle), and the version it shows is the one module that holds it and the one the distribution
declares. The capabilities beside the client (`BESIDE`) are the other way round: the facade never
imports them, and `xdsclient.lb` builds on the public API alone."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import xdsclient
from xdsclient import _version

PACKAGE = Path(xdsclient.__file__).parent
#: packages beside the client: never imported by it, so they may import its facade (``_call``:
#: the data plane's call path, which the front ends share and which hashes with ``lb``)
BESIDE = ("lb", "load", "testing", "conformance", "_call", "_plane", "grpc", "sync", "httpx")
#: the programs (the command line and its demo): users of everything, not the client
PROGRAMS = ("_cli", "__main__.py", "_demo.py")


def _facade_imports(path: Path) -> Iterator[str]:
    """``line: names`` for each import in ``path`` that takes names from the facade (submodules
    and subpackages taken by name are modules, not the facade's names)."""
    depth = len(path.relative_to(PACKAGE).parts)  # xdsclient/x.py: 1, xdsclient/sub/y.py: 2
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            if any(alias.name == "xdsclient" for alias in node.names):
                yield f"{node.lineno}: import xdsclient"
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        facade = (node.level == 0 and node.module == "xdsclient") or (
            node.level == depth and node.module is None
        )
        if not facade:
            continue
        names = [a.name for a in node.names if not _is_module(PACKAGE / a.name)]
        if names:
            yield f"{node.lineno}: {', '.join(names)}"


def _is_module(path: Path) -> bool:
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_no_module_in_the_package_imports_the_facade() -> None:
    """Modules inside ``xdsclient`` import from private modules, never the names of the
    package's ``__init__`` (the version included: it lives in ``_version``)."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{where}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "__init__.py" and path.relative_to(PACKAGE).parts[0] not in BESIDE
        for where in _facade_imports(path)
    ]
    assert found == []


def _imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) for each import in ``path``, relative ones resolved."""
    package = ["xdsclient", *path.relative_to(PACKAGE).parts[:-1]]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield node.lineno, module
            yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)


def test_the_client_never_imports_the_packages_beside_it() -> None:
    """No module of the client imports a `BESIDE` package (which is what lets those import the
    facade without a cycle); the `PROGRAMS`, users of all of them, are not the client."""
    beside = tuple(f"xdsclient.{name}" for name in BESIDE)
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in (*BESIDE, *PROGRAMS)
        for line, module in _imported_modules(path)
        if module in beside or module.startswith(tuple(f"{b}." for b in beside))
    ]
    assert found == []


def test_load_balancing_builds_on_the_public_api_alone() -> None:
    """`xdsclient.lb` imports the facade and `xdsclient.resources`, never a private module of
    the client: it is what a user could have written."""
    private = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.module}"
        for path in sorted((PACKAGE / "lb").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ImportFrom)
        and node.level == 2
        and node.module is not None
        and node.module.split(".")[0].startswith("_")
    ]
    assert private == []


def test_the_version_is_the_distributions_and_the_facade_shows_it() -> None:
    """``xdsclient.__version__`` is `_version.__version__`, the version the installed
    distribution declares (pyproject.toml)."""
    assert xdsclient.__version__ == _version.__version__
    assert _version.__version__ == importlib.metadata.version("xdsclient")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _edges(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for each xdsclient module ``path`` imports, wherever the import is (at the
    top, in a function, under TYPE_CHECKING): ``from p import m`` names ``p.m`` when that is a
    module, else ``p``. A package's ``__init__`` that Python runs on the way is not counted (the
    facade runs on every import; the tests above hold it to importing nothing back)."""
    package = ["xdsclient", *path.relative_to(PACKAGE).parts[:-1]]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                inner = f"{module}.{alias.name}"
                if inner in MODULES:
                    yield node.lineno, inner
                elif module in MODULES:
                    yield node.lineno, module


def import_graph() -> dict[str, set[str]]:
    """module -> the other xdsclient modules it imports."""
    return {name: {m for _, m in _edges(path) if m != name} for name, path in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first, three colours)."""
    done: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(name: str) -> list[str] | None:
        stack.append(name)
        on_stack.add(name)
        for nxt in sorted(graph.get(name, ())):
            if nxt in on_stack:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in done and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        on_stack.discard(name)
        done.add(name)
        return None

    for start in sorted(graph):
        if start not in done and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle among xdsclient's modules, counting imports inside functions and under
    TYPE_CHECKING: each layer can be read, and tested, without the ones above it."""
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_cycle_finder_names_a_cycle() -> None:
    """The finder reports a cycle it is given, so the test above can fail."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


#: The layers: each folder of the package (or module at its root) and what it may import. Read
#: upwards: the root modules are names, errors and helpers every layer shares; `resources` the
#: resource types (and localities); `_protocol` the sans-I/O state machines (discovery, LRS), the
#: cache and the service table; `_settings` the values the client is built from; `_runtime`
#: clock, tasks and collector; `_transports` the streams; `_observe` protocol events and their
#: observers; `_watch` the watch layer; `_shell` the drive loop and the server pool; `_client`
#: the facade over them; then the programs and the packages beside the client (`BESIDE`), which
#: may use the facade (``__init__``).
SHARED = (
    "_call_status", "_errors", "_names", "_slots", "_validators", "_version", "_wire", "_xdstp"
)  # fmt: skip
LAYERS: dict[str, frozenset[str]] = {
    "_compiled": frozenset(),  # which build runs: the facade and the CLI ask it
    "_call_status": frozenset(),  # the status a gRPC stream call ended with (client, load, grpc)
    "_errors": frozenset(),
    "_names": frozenset(),
    "_slots": frozenset(),
    "_validators": frozenset(),
    "_version": frozenset(),
    "_wire": frozenset(),  # the compiled wire readers' protobuf primitives
    "_xdstp": frozenset({"_errors"}),
    "resources": frozenset(SHARED),
    "_protocol": frozenset({*SHARED, "resources"}),
    # ClientOptions holds the protocol's options; the bootstrap reads the service table
    "_settings": frozenset({*SHARED, "resources", "_protocol"}),
    "_runtime": frozenset(SHARED),
    "_transports": frozenset({*SHARED, "_settings", "_protocol", "_runtime"}),
    "_observe": frozenset({*SHARED, "_protocol"}),
    "_watch": frozenset({*SHARED, "_settings", "resources", "_protocol", "_runtime"}),
    "_shell": frozenset(
        {*SHARED, "_settings", "resources", "_protocol", "_runtime", "_transports", "_observe"}
    ),
    "_client": frozenset(
        {*SHARED, "_settings", "resources", "_protocol", "_runtime", "_transports", "_observe"}
        | {"_watch", "_shell"}
    ),
    "__init__": frozenset(),  # the facade: anything but the programs and BESIDE (below)
    "lb": frozenset({"__init__", "resources"}),
    "_call": frozenset({"__init__", "resources", "lb"}),  # the data plane's call path
    # proxyless gRPC over the call path and lb; `_settings` for a target's listener name (A47),
    # computed as the client's watch_config computes it
    # the asyncio shell of the call path every front end shares, and what they share beyond
    # it (the TLS policy and certificates)
    "_plane": frozenset({"__init__", "resources", "lb", "_call", "_settings"}),
    "grpc": frozenset(
        {"__init__", "resources", "lb", "_call", "_settings", "_plane", "_call_status"}
    ),
    # the sync facade: the client on a loop thread, through the public API alone
    "sync": frozenset({"__init__"}),
    # proxyless HTTP: the same parts as gRPC's front end; its sync transport runs on the sync
    # facade's loop thread
    "httpx": frozenset({"__init__", "resources", "lb", "_call", "_settings", "_plane", "sync"}),
    # the deprecated `AioBalancer` (below: `OWN_UNITS`): a thin use of grpc's `XdsChannel`
    "lb.aio": frozenset({"__init__", "resources", "lb", "grpc"}),
    "load": frozenset(),  # beside the client: anything but the programs
    "testing": frozenset(),
    "conformance": frozenset(),
    "_cli": frozenset(),  # the programs: anything
    "_demo": frozenset(),
    "__main__": frozenset(),
}
#: Modules that are a layer of their own, not their folder's: `lb/aio.py`, the deprecated
#: `AioBalancer`, is a thin use of `grpc` (which builds on `lb`), kept at the name its users
#: import until it is removed; nothing else in `lb` may import `grpc`.
OWN_UNITS = {"xdsclient.lb.aio": "lb.aio"}
#: Units that may import any unit but the programs (and, for the facade, `BESIDE`).
ANYTHING = {"__init__", "load", "testing", "conformance", "_cli", "_demo", "__main__"}
PROGRAM_UNITS = {"_cli", "_demo", "__main__"}


def _unit(module: str) -> str:
    """The layer a module is in: its folder under the package, or itself at the root (or its
    own, `OWN_UNITS`)."""
    if module in OWN_UNITS:
        return OWN_UNITS[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def may_import(unit: str, used: str) -> bool:
    """Whether a module of layer ``unit`` may import one of layer ``used``."""
    if used == unit:
        return True
    if unit in ANYTHING:
        if used in PROGRAM_UNITS and unit not in PROGRAM_UNITS:
            return False
        return not (unit == "__init__" and used in BESIDE)
    return used in LAYERS[unit]


def test_every_module_imports_only_from_its_own_and_lower_layers() -> None:
    """Each import of each module (function-level and TYPE_CHECKING ones included) goes to its
    own layer or one `LAYERS` lets it use."""
    assert {_unit(name) for name in MODULES} <= set(LAYERS), "a folder in no layer: add it"
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {_unit(name)} -> {module}"
        for name, path in MODULES.items()
        for line, module in _edges(path)
        if not may_import(_unit(name), _unit(module))
    ]
    assert found == []


def test_a_climb_is_against_the_layers() -> None:
    """The check refuses an import upwards and allows one downwards (so the test above can
    fail): the circles that were (the CSDS dump and waits importing the client) are refused."""
    assert may_import("_watch", "_protocol")
    assert not may_import("_protocol", "_watch")
    assert not may_import("_watch", "_client")
    assert not may_import("_observe", "_client")
    assert not may_import("_watch", "_shell")
    assert not may_import("_client", "_cli")
    assert not may_import("__init__", "lb")
    assert may_import("lb", "__init__")


def test_the_layers_are_a_hierarchy() -> None:
    """No two layers may import each other, even through others: the table is a hierarchy."""
    assert find_cycle({unit: set(used) for unit, used in LAYERS.items()}) is None


def _session_private_names() -> set[str]:
    """The private methods and attributes of `Session` (``_x``, not dunders)."""
    source = PACKAGE / "_protocol" / "_session.py"
    tree = ast.parse(source.read_text(), str(source))
    session = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session")
    names = set()
    for node in ast.walk(session):
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_nothing_outside_the_protocol_touches_a_sessions_private_state() -> None:
    """Outside ``_protocol/`` (the package, tests, benchmarks, examples) a session is changed
    through `SessionWriter` and read through its public members: no ``x._name`` of a private
    member of `Session` on anything but ``self`` (a name shared with another class's private
    member is flagged too: rename one)."""
    private = _session_private_names()
    assert {"_state", "_types"} <= private  # what the shell used to reach for
    roots = [PACKAGE.parent / d for d in ("xdsclient", "tests", "bench", "examples")]
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}"
        for root in roots
        for path in sorted(root.rglob("*.py"))
        if not path.is_relative_to(PACKAGE / "_protocol")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute)
        and node.attr in private
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert found == []


#: Modules a client that names no regex, reads no bootstrap's custom LB policy and builds no
#: import hook never uses: ``import xdsclient`` leaves them to the first use (each costs RSS in
#: every process: RE2 1 MiB, ``importlib.abc`` with ``importlib.resources`` 1.3 MiB).
LAZY_MODULES = ("re2", "importlib.abc", "importlib.resources", "google.protobuf.json_format")


def test_importing_the_client_leaves_the_modules_it_does_not_need_unloaded() -> None:
    """``import xdsclient`` in a fresh interpreter imports none of `LAZY_MODULES`."""
    code = (
        f"import sys, xdsclient; print(' '.join(m for m in {LAZY_MODULES!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(xdsclient.__file__).parents[1])},
    ).stdout.split()
    assert loaded == []


def test_a_regex_loads_re2_when_first_compiled() -> None:
    """The lazily imported RE2 still compiles and rejects patterns as before."""
    from xdsclient.resources._regex import RegexError, compile_regex

    assert compile_regex("a+b", ignore_case=True).fullmatch("AAB") is not None
    with pytest.raises(RegexError, match="not a valid RE2 pattern"):
        compile_regex("(?=lookahead)")
