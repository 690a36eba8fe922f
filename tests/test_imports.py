"""The package facade is the API, never a dependency of the client: no module of the client
imports a name from ``xdsclient/__init__.py`` (so the facade can import any module without a
cycle), and the version it shows is the one module that holds it and the one the distribution
declares. The capabilities beside the client (`BESIDE`) are the other way round: the facade never
imports them, and `xdsclient.lb` builds on the public API alone."""

from __future__ import annotations

import ast
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import xdsclient
from xdsclient import _version

PACKAGE = Path(xdsclient.__file__).parent
#: packages beside the client: never imported by it, so they may import its facade
BESIDE = ("lb", "load", "testing", "conformance")
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
