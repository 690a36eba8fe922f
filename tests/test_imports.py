"""The package facade is the API, never a dependency: no module inside ``xdsclient`` imports a
name from ``xdsclient/__init__.py`` (so the facade can import any module without a cycle), and
the version it shows is the one module that holds it and the one the distribution declares."""

from __future__ import annotations

import ast
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import xdsclient
from xdsclient import _version

PACKAGE = Path(xdsclient.__file__).parent


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
        if path != PACKAGE / "__init__.py"
        for where in _facade_imports(path)
    ]
    assert found == []


def test_the_version_is_the_distributions_and_the_facade_shows_it() -> None:
    """``xdsclient.__version__`` is `_version.__version__`, the version the installed
    distribution declares (pyproject.toml)."""
    assert xdsclient.__version__ == _version.__version__
    assert _version.__version__ == importlib.metadata.version("xdsclient")
