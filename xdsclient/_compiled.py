"""Which build runs: the hot modules compiled with mypyc, or all of the package as Python.

Why a module of its own: the wheels built for release compile the modules of the EDS update
path (`MODULES`; pyproject.toml's mypyc build hook names the same files, a test checks) into C
extensions, which Python imports in place of their sources; the sdist and every platform
without a wheel run the same modules as Python. The facade imports this module first, and
importing it (`install`) decides, before any of them is imported, whether they load from their
sources:

- ``XDSCLIENT_PURE=1`` in the environment runs every module as Python (to compare, or to rule
  the compiled build out);
- in a source checkout, a build older than one of its sources (`make compiled` not run since an
  edit) would hide the edit: the sources run instead, with a warning. The compiled modules call
  each other in C, so it is all of them or none.

`is_compiled` tells which build the process runs (``xdsclient.compiled``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["MODULES", "PURE_VARIABLE", "from_sources", "install", "is_compiled"]

#: The modules the compiled build compiles: the update path of every response (the wire
#: primitives, the EDS wire reader, the common cluster's and route configuration's wire
#: readers, the cache entries, the classify step, the per-type state that applies what it
#: found, and its SotW and Delta variants).
MODULES = (
    "xdsclient._wire",
    "xdsclient.resources._endpoint_wire",
    "xdsclient.resources._cluster_wire",
    "xdsclient.resources._route_wire",
    "xdsclient._protocol._cache",
    "xdsclient._protocol._classify",
    "xdsclient._protocol._typestate",
    "xdsclient._protocol._sotw",
    "xdsclient._protocol._delta",
)

#: Set to ``1``, the environment variable that runs every module from its source.
PURE_VARIABLE = "XDSCLIENT_PURE"

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _source(root: str, module: str) -> str:
    return os.path.join(root, *module.split(".")) + ".py"


def _built(root: str, module: str) -> str | None:
    """The compiled module's file beside its source, if there is one."""
    leaf = module.rpartition(".")[2]
    folder = os.path.dirname(_source(root, module))
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        if name.startswith(leaf + ".") and name.endswith((".so", ".pyd")):
            return os.path.join(folder, name)
    return None


def _stale(root: str) -> list[str]:
    """The compiled modules under ``root`` older than their sources, in a source checkout (where
    pyproject.toml sits beside the package); an installed wheel is never stale."""
    if not os.path.exists(os.path.join(root, "pyproject.toml")):
        return []
    return [
        built
        for module in MODULES
        if (built := _built(root, module)) is not None
        and os.path.exists(source := _source(root, module))
        and os.path.getmtime(source) > os.path.getmtime(built)
    ]


def from_sources(environ: Mapping[str, str], root: str) -> tuple[bool, str | None]:
    """Whether `MODULES` under ``root`` must load from their sources, and the warning to give
    when that is not what was asked for (a stale build)."""
    if environ.get(PURE_VARIABLE) == "1":
        return True, None
    stale = _stale(root)
    if not stale:
        return False, None
    return True, (
        f"{stale[0]} is older than its source; running the pure-Python modules "
        "(run `make compiled` again)"
    )


class _SourceFinder:
    """Finds `MODULES` as their ``.py`` sources, ahead of the compiled extensions.

    A meta path finder by its ``find_spec`` alone: ``importlib.abc`` would import
    ``importlib.resources`` (tempfile, shutil, bz2, lzma: 1.3 MiB) into every client.
    """

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(_ROOT, fullname))


def install() -> None:
    """Decide, before any of `MODULES` is imported, whether they load from their sources."""
    if any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
        return
    wanted, warning = from_sources(os.environ, _ROOT)
    if warning is not None:
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    if wanted:
        sys.meta_path.insert(0, _SourceFinder())


def is_compiled() -> bool:
    """Whether every module of `MODULES` runs compiled (imports them)."""
    return all(
        not (importlib.import_module(module).__file__ or ".py").endswith(".py")
        for module in MODULES
    )


install()
