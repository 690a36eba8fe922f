"""The built site holds what it promises: every public name in the API reference, the CLI
reference and the examples it includes. Needs MkDocs (the ``docs`` extra); skips without it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from xdsclient._cli import COMMANDS

from ..test_docstrings import PACKAGES
from .conftest import ROOT

#: the first test builds the site (the `site` fixture): about 50 s on a busy 2-core machine
pytestmark = pytest.mark.timeout(300)

#: the API reference page that renders each module of the docstring check
PAGES = {
    "xdsclient": "api/xdsclient/index.html",
    "xdsclient.resources": "api/resources/index.html",
    "xdsclient.testing": "api/testing/index.html",
    "xdsclient.testing.builders": "api/testing/index.html",
    "xdsclient.testing.pytest_plugin": "api/testing/index.html",
    "xdsclient.conformance": "api/conformance/index.html",
    "xdsclient.lb": "api/lb/index.html",
    "xdsclient.lb.aio": "api/lb/index.html",
    "xdsclient.load": "api/load/index.html",
    "xdsclient.grpc": "api/grpc/index.html",
    "xdsclient.httpx": "api/httpx/index.html",
    "xdsclient.sync": "api/sync/index.html",
}


def test_the_api_reference_has_an_entry_for_every_public_name(site: Path) -> None:
    """Each name in the packages' ``__all__`` has its anchor on its package's page."""
    assert set(PAGES) == set(PACKAGES)
    missing = []
    for module_name, page in PAGES.items():
        anchors = set(re.findall(r'id="([^"]+)"', (site / page).read_text()))
        module = importlib.import_module(module_name)
        missing += [
            f"{module_name}.{n}" for n in module.__all__ if f"{module_name}.{n}" not in anchors
        ]
    assert missing == []


def test_the_api_reference_shows_field_comments_and_docstrings(site: Path) -> None:
    """Docstrings and the ``#:`` comments above fields both reach the reference."""
    html = (site / "api/resources/index.html").read_text()
    assert "the ClusterLoadAssignment to watch" in html  # a #: comment on ClusterView
    assert "Every built-in type above." in html  # a #: comment on a constant
    assert "ROUND_ROBIN, the default policy" in html  # a class docstring


def test_the_cli_page_holds_every_subcommands_help(site: Path) -> None:
    """The command-line page was filled by the hook at build time."""
    html = (site / "cli/index.html").read_text()
    for name in COMMANDS:
        assert f"usage: xdsclient {name}" in html


def test_the_pages_include_the_examples_themselves(site: Path) -> None:
    """Getting started shows examples/watch_cluster.py as it is in the repository."""
    html = (site / "getting-started/index.html").read_text()
    example = (ROOT / "examples" / "watch_cluster.py").read_text()
    first_def = next(line for line in example.splitlines() if line.startswith("async def main"))
    assert re.sub(r"<[^>]+>", "", html).count(first_def.split("(")[0]) >= 1
