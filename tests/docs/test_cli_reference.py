"""The command-line reference is generated from the parsers, and its exit statuses are the CLI's.

``docs/_hooks/cli_reference.py`` fills ``docs/cli.md`` with the ``--help`` of every subcommand
while the site builds; these tests run it without MkDocs.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from types import ModuleType

import xdsclient._cli as cli
from xdsclient._cli import COMMANDS

from .conftest import ROOT

PAGE = ROOT / "docs" / "cli.md"


def hook() -> ModuleType:
    """The MkDocs hook, loaded from its file as MkDocs loads it."""
    path = ROOT / "docs" / "_hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_shows_the_help_of_xdsclient_and_every_subcommand() -> None:
    """Each subcommand gets a section with its whole ``--help``, in the order of COMMANDS."""
    text = hook().render()
    assert text.startswith("```text\nusage: xdsclient [-h] [--version]")
    headings = re.findall(r"^## `xdsclient (\w+)`$", text, re.M)
    assert headings == list(COMMANDS)
    for name, command in COMMANDS.items():
        assert f"usage: xdsclient {name} [-h]" in text
        assert command.help in text


def test_the_help_is_the_same_whatever_the_terminal(monkeypatch) -> None:
    """The page does not depend on the terminal that built the site, and no colour leaks in."""
    module = hook()
    pages = []
    for columns in ("40", "200"):
        monkeypatch.setenv("COLUMNS", columns)
        monkeypatch.setenv("FORCE_COLOR", "1")
        pages.append(module.render())
    assert pages[0] == pages[1]
    assert "\x1b[" not in pages[0]


def test_the_hook_fills_the_marker_and_leaves_other_pages_alone() -> None:
    """Only a page holding the marker changes; cli.md holds it once."""
    module = hook()
    page = PAGE.read_text()
    assert page.count(module.MARKER) == 1
    filled = module.on_page_markdown(page, page=None, config=None, files=None)
    assert module.MARKER not in filled
    assert "usage: xdsclient watch" in filled
    assert module.on_page_markdown("# Other\n", page=None) == "# Other\n"


def _statuses() -> dict[int, str]:
    """Every exit status the CLI modules define (module-level upper-case int constants)."""
    found: dict[int, str] = {}
    for module in pkgutil.iter_modules(cli.__path__):
        namespace = vars(importlib.import_module(f"{cli.__name__}.{module.name}"))
        for name, value in namespace.items():
            if name.isupper() and type(value) is int:
                found.setdefault(value, f"{module.name}.{name}")
    return found


def test_the_exit_status_table_lists_exactly_the_statuses_the_cli_returns() -> None:
    """docs/cli.md's table is rendered from `EXIT_STATUSES`, which holds every status the CLI
    modules define, and nothing else."""
    from xdsclient._cli._common import EXIT_STATUSES

    module = hook()
    page = module.on_page_markdown(PAGE.read_text(), page=None)
    table = [(int(n), m) for n, m in re.findall(r"^\| (\d+) \| (.+) \|$", page, re.M)]
    assert table == list(EXIT_STATUSES)
    defined = _statuses()
    assert {0, 1, 2, 3, 4, 5, 6, 70, 130, 141} <= set(defined)  # the scan finds what it should
    undocumented = {status: name for status, name in defined.items() if status not in dict(table)}
    assert undocumented == {}, "add these to EXIT_STATUSES in xdsclient/_cli/_common.py"
