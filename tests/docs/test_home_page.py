"""The home page is a map of the whole project: it names and links every command of the CLI and
every public API package, so a new command or package cannot be left off it. Reads the Markdown
itself: needs no docs tools."""

from __future__ import annotations

import re

from xdsclient._cli import COMMANDS

from ..test_docstrings import PACKAGES
from .conftest import ROOT

HOME = ROOT / "docs" / "index.md"


def _links() -> dict[str, str]:
    """Each link of the home page: its text, to where it goes."""
    return dict(re.findall(r"\[([^\]]+)\]\(([^)\s]+)\)", " ".join(HOME.read_text().split())))


def test_the_home_page_links_every_command_to_its_reference() -> None:
    """Each subcommand of ``xdsclient --help`` has a link to its section of the CLI page."""
    links = _links()
    missing = [
        name
        for name in COMMANDS
        if f"cli.md#xdsclient-{name}" not in links.values()
        or not any(re.search(rf"`(xdsclient )?{name}`", text) for text in links)
    ]
    assert missing == []


def test_the_home_page_names_every_api_package_with_a_link_to_its_page() -> None:
    """Each public package is named on the home page, and those with a reference page of their
    own (or a section of one) are links to it, to a page that exists."""
    text, links = HOME.read_text(), _links()
    assert [p for p in PACKAGES if f"`{p}`" not in text] == []
    linked = {p: links.get(f"`{p}`") for p in PACKAGES if "." not in p.removeprefix("xdsclient.")}
    linked["xdsclient.lb.aio"] = links.get("`xdsclient.lb.aio`")
    assert {p: t for p, t in linked.items() if t is None} == {}
    for target in linked.values():
        assert target is not None
        assert (ROOT / "docs" / target.partition("#")[0]).is_file(), target
