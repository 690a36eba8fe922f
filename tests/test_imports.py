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
#: packages beside the client: never imported by it, so they may import its facade (``_call``:
#: the data plane's call path, which the front ends share and which hashes with ``lb``)
BESIDE = ("lb", "load", "testing", "conformance", "_call", "grpc")
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
