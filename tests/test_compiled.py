"""Which build runs: the compiled modules where they are built and fresh, their sources
otherwise, and ``xdsclient.compiled`` and ``xdsclient --version`` say which.

``make test`` builds the compiled modules in place and sets ``XDSCLIENT_REQUIRE_COMPILED=1``, so
the suite runs what the wheels ship; ``make test-pure`` runs it again with ``XDSCLIENT_PURE=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import xdsclient
from xdsclient import _compiled
from xdsclient.resources import ENDPOINT, _endpoint, _endpoint_wire

ROOT = Path(xdsclient.__file__).parent.parent


def _python(code: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
        check=True,
    )
    return done.stdout.strip()


def test_the_compiled_build_is_the_one_loaded_when_required() -> None:
    """Under ``make test`` every compiled module is loaded as its extension, and the EDS
    decoder reads with the compiled wire reader."""
    if os.environ.get("XDSCLIENT_REQUIRE_COMPILED") != "1":
        pytest.skip("make test runs this (XDSCLIENT_REQUIRE_COMPILED=1)")
    assert xdsclient.compiled is True
    for module in _compiled.MODULES:
        assert not (sys.modules[module].__file__ or "").endswith(".py"), module
    assert _endpoint_wire.COMPILED
    assert _endpoint.decode_cluster_load_assignment is _endpoint_wire.decode
    assert ENDPOINT.decode is _endpoint_wire.decode


def test_the_flag_is_true_exactly_when_every_module_runs_compiled() -> None:
    """``xdsclient.compiled`` is the truth about the modules this process imported."""
    loaded = [sys.modules[module].__file__ or "" for module in _compiled.MODULES]
    assert xdsclient.compiled is not any(path.endswith(".py") for path in loaded)
    assert xdsclient.compiled is _endpoint_wire.COMPILED


def test_xdsclient_pure_runs_every_module_from_its_source() -> None:
    """With ``XDSCLIENT_PURE=1`` no compiled module is loaded, built or not, and the flag and
    ``--version`` say pure Python."""
    code = (
        "import sys, xdsclient; from xdsclient import _compiled; "
        "print(xdsclient.compiled, all(sys.modules[m].__file__.endswith('.py') "
        "for m in _compiled.MODULES))"
    )
    assert _python(code, XDSCLIENT_PURE="1") == "False True"
    version = _python("from xdsclient._cli import main; main(['--version'])", XDSCLIENT_PURE="1")
    assert version == f"xdsclient {xdsclient.__version__} (pure Python)"


def test_the_version_says_which_build_runs() -> None:
    """``xdsclient --version`` names the build of the process it runs in."""
    build = "compiled" if xdsclient.compiled else "pure Python"
    version = _python("from xdsclient._cli import main; main(['--version'])")
    assert version == f"xdsclient {xdsclient.__version__} ({build})"


def test_the_wheel_hook_compiles_the_modules_the_package_names() -> None:
    """pyproject.toml's mypyc hook (the wheels, ``make compiled``) and `_compiled.MODULES`
    name the same modules, so the flag checks what was compiled."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        hook = tomllib.load(file)["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["mypyc"]
    included = sorted(
        path.lstrip("/").removesuffix(".py").replace("/", ".") for path in hook["include"]
    )
    assert included == sorted(_compiled.MODULES)
    assert hook["enable-by-default"] is False  # the sdist builds anywhere, without a C compiler


def _checkout(tmp_path: Path, *, built_after_source: bool) -> Path:
    """A source checkout in ``tmp_path`` with every module built, older or newer than its
    source."""
    (tmp_path / "pyproject.toml").write_text("")
    for module in _compiled.MODULES:
        source = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
        source.parent.mkdir(parents=True, exist_ok=True)
        built = source.with_name(f"{source.stem}.cpython-311-x86_64-linux-gnu.so")
        source.write_text("")
        built.write_bytes(b"")
        older, newer = (source, built) if built_after_source else (built, source)
        os.utime(older, (1_000_000, 1_000_000))
        os.utime(newer, (2_000_000, 2_000_000))
    return tmp_path


def test_a_fresh_build_is_used(tmp_path: Path) -> None:
    """Built after its sources, the compiled build runs, without a warning."""
    root = _checkout(tmp_path, built_after_source=True)
    assert all(_compiled._built(str(root), module) for module in _compiled.MODULES)
    assert _compiled.from_sources({}, str(root)) == (False, None)


def test_a_build_older_than_its_source_is_not_used_and_says_so(tmp_path: Path) -> None:
    """An edit since the last ``make compiled`` runs the sources, with a warning that says
    how to rebuild."""
    root = _checkout(tmp_path, built_after_source=False)
    wanted, warning = _compiled.from_sources({}, str(root))
    assert wanted is True
    assert warning is not None
    assert "older than its source" in warning
    assert "make compiled" in warning


def test_an_installed_build_is_never_stale(tmp_path: Path) -> None:
    """Outside a source checkout (no pyproject.toml beside the package: an installed wheel,
    whose files carry install times) the build runs whatever the times say."""
    root = _checkout(tmp_path, built_after_source=False)
    (root / "pyproject.toml").unlink()
    assert _compiled.from_sources({}, str(root)) == (False, None)


def test_xdsclient_pure_turns_a_fresh_build_off(tmp_path: Path) -> None:
    """``XDSCLIENT_PURE=1`` runs the sources even beside a fresh build, and says nothing."""
    root = _checkout(tmp_path, built_after_source=True)
    assert _compiled.from_sources({"XDSCLIENT_PURE": "1"}, str(root)) == (True, None)
