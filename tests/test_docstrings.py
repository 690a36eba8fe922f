"""Every public name has a docstring: the API reference shows nothing for one without.

Public means: each name in the ``__all__`` of `PACKAGES`, and the public methods and properties
of each public class (its own, and those it inherits from our private bases, which the reference
shows too). A class or function needs a docstring; a constant or type alias needs a ``#:``
comment above its assignment, or a string literal after it (what the reference reads). The
failure lists every undocumented name, so that a merge that adds public names says exactly which
need one.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

#: the modules whose ``__all__`` the API reference renders
PACKAGES = (
    "xdsclient",
    "xdsclient.resources",
    "xdsclient.testing",
    "xdsclient.testing.builders",
    "xdsclient.testing.pytest_plugin",
    "xdsclient.conformance",
    "xdsclient.lb",
    "xdsclient.lb.aio",
    "xdsclient.load",
    "xdsclient.grpc",
    "xdsclient.httpx",
    "xdsclient.sync",
)


def undocumented(module_names: tuple[str, ...], root: str = "xdsclient") -> list[str]:
    """Each public name of those modules without a docstring, as ``module.Name[.member]``.

    ``root``: classes defined in modules under it count as ours (their inherited members are
    checked too); anything else (the standard library, attrs) is not.
    """
    missing: list[str] = []
    seen: set[int] = set()
    for module_name in module_names:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            path = f"{module_name}.{name}"
            obj = getattr(module, name)
            if inspect.isclass(obj):
                if id(obj) not in seen and not obj.__dict__.get("__doc__"):
                    missing.append(path)
                missing.extend(_members(obj, path, root, seen))
                seen.add(id(obj))
            elif inspect.isfunction(obj):
                if id(obj) not in seen and not obj.__doc__:
                    missing.append(path)
                seen.add(id(obj))
            elif not _data_documented(module_name, name):
                missing.append(path)
    return missing


def _members(cls: type, path: str, root: str, seen: set[int]) -> Iterator[str]:
    """The public methods and properties of ``cls`` (and of its bases under ``root``)."""
    reported: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith(root):
            continue
        for name, attribute in vars(klass).items():
            function = _function_of(attribute)
            if name.startswith("_") or function is None or name in reported:
                continue
            reported.add(name)  # an override hides the base's member
            if id(function) in seen:
                continue
            seen.add(id(function))
            if not function.__doc__:
                yield f"{path}.{name}"


def _function_of(attribute: Any) -> Any:
    """The function holding a member's docstring, or None for what is not a method/property."""
    if isinstance(attribute, classmethod | staticmethod):
        return attribute.__func__
    if isinstance(attribute, property):
        return attribute.fget
    if isinstance(attribute, cached_property):
        return attribute.func
    if inspect.isfunction(attribute):
        return attribute
    return None


def _data_documented(module_name: str, name: str) -> bool:
    """Whether the assignment that defines ``module_name.name`` carries a doc comment."""
    module_name, statements, index = _assignment(module_name, name)
    source = Path(_origin(module_name)).read_text().splitlines()
    above = source[statements[index].lineno - 2] if statements[index].lineno > 1 else ""
    if above.lstrip().startswith("#:"):
        return True
    after = statements[index + 1] if index + 1 < len(statements) else None
    return (
        isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
    )


def _assignment(module_name: str, name: str) -> tuple[str, list[ast.stmt], int]:
    """Where ``name`` is assigned, following ``from ... import`` re-exports."""
    statements = ast.parse(Path(_origin(module_name)).read_text()).body
    is_package = Path(_origin(module_name)).name == "__init__.py"
    for index, statement in enumerate(statements):
        if isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(module_name, is_package, statement)
                    return _assignment(source, alias.name)
        if _assigns(statement, name):
            return module_name, statements, index
    raise LookupError(f"{module_name}.{name}: no assignment or import found")


def _assigns(statement: ast.stmt, name: str) -> bool:
    if isinstance(statement, ast.AnnAssign):
        return isinstance(statement.target, ast.Name) and statement.target.id == name
    if isinstance(statement, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
    return False


def _absolute(module_name: str, is_package: bool, statement: ast.ImportFrom) -> str:
    if statement.level == 0:
        assert statement.module is not None
        return statement.module
    parts = module_name.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (statement.level - 1)]
    return ".".join([*base, statement.module] if statement.module else base)


def _origin(module_name: str) -> str:
    spec = importlib.util.find_spec(module_name)
    assert spec is not None
    assert spec.origin is not None
    return spec.origin


def test_every_public_name_and_member_has_a_docstring() -> None:
    """Every name in the packages' ``__all__``, and each public method and property, is
    documented."""
    missing = undocumented(PACKAGES)
    assert not missing, f"{len(missing)} public names have no docstring:\n" + "\n".join(missing)


_FIXTURE_PACKAGE = {
    "__init__.py": '''
        """A package."""
        from ._impl import CONSTANT, DOCUMENTED, Bare, Base, Good, bare, good
        __all__ = ["CONSTANT", "DOCUMENTED", "Bare", "Base", "Good", "bare", "good"]
    ''',
    "_impl.py": '''
        """Its implementation."""
        CONSTANT = 1
        #: documented
        DOCUMENTED = 2

        class _Private:
            def inherited(self): pass

        class Base(_Private):
            """Documented, but inherits an undocumented method."""

        class Bare:
            @property
            def prop(self): return 1
            def method(self): pass
            def _private(self): pass

        class Good:
            """Documented."""
            @classmethod
            def make(cls):
                """Documented."""

        def bare(): pass

        def good():
            """Documented."""
    ''',
}


def test_the_check_names_each_undocumented_class_member_function_and_constant(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The check reports exactly the undocumented names of a package, members included."""
    package = tmp_path / "undocumented_pkg"
    package.mkdir()
    for file, text in _FIXTURE_PACKAGE.items():
        (package / file).write_text(inspect.cleandoc(text) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        missing = undocumented(("undocumented_pkg",), root="undocumented_pkg")
    finally:
        for name in [m for m in sys.modules if m.startswith("undocumented_pkg")]:
            del sys.modules[name]
    assert sorted(missing) == [
        "undocumented_pkg.Bare",
        "undocumented_pkg.Bare.method",
        "undocumented_pkg.Bare.prop",
        "undocumented_pkg.Base.inherited",
        "undocumented_pkg.CONSTANT",
        "undocumented_pkg.bare",
    ]
