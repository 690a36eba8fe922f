"""MkDocs hook: the command-line reference, rendered from the argument parsers at build time.

Why a hook: the page shows the ``--help`` of ``xdsclient`` and of every subcommand in
``xdsclient._cli.COMMANDS``, produced by argparse itself while the site builds, so it cannot
drift from the code (a new subcommand appears on its own). No maintained MkDocs plugin renders
plain argparse parsers, and a hook is MkDocs' own mechanism: nothing to install, nothing tied to
a theme. ``tests/docs/test_cli_reference.py`` checks what it renders.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from typing import Any

#: where `docs/cli.md` wants the generated reference
MARKER = "<!-- cli-reference -->"
#: where `docs/cli.md` wants the exit-status table (``EXIT_STATUSES``, as ``--help`` prints it)
STATUS_MARKER = "<!-- exit-statuses -->"
#: the width argparse wraps help at (it reads ``COLUMNS``), so the page does not depend on the
#: terminal that built it
WIDTH = "80"


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace `MARKER` on a page with the reference and `STATUS_MARKER` with the exit-status
    table (MkDocs calls this for every page)."""
    if STATUS_MARKER in markdown:
        markdown = markdown.replace(STATUS_MARKER, status_table())
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, render())
    return markdown


def status_table() -> str:
    """The CLI's exit statuses as a Markdown table: the one ``--help`` and the README show."""
    from xdsclient._cli._common import EXIT_STATUSES

    rows = [f"| {status} | {meaning} |" for status, meaning in EXIT_STATUSES]
    return "\n".join(["| status | meaning |", "|---|---|", *rows])


def render() -> str:
    """The reference: the top-level help, then one section per subcommand, in order."""
    from xdsclient._cli import COMMANDS

    parts = [_block(help_text([]))]
    for name, command in COMMANDS.items():
        parts.append(f"## `xdsclient {name}`\n\n{command.help[:1].upper()}{command.help[1:]}.")
        parts.append(_block(help_text([name])))
    return "\n\n".join(parts) + "\n"


def help_text(argv: list[str]) -> str:
    """What ``xdsclient ARGV --help`` prints, captured in this process."""
    from xdsclient._cli import main

    out = io.StringIO()
    with _plain_environment(), contextlib.redirect_stdout(out):
        try:
            main([*argv, "--help"])
        except SystemExit as exc:  # argparse exits after printing help
            if exc.code not in (0, None):
                raise RuntimeError(f"xdsclient {' '.join(argv)} --help exited {exc.code}") from exc
    return out.getvalue().rstrip()


def _block(text: str) -> str:
    return f"```text\n{text}\n```"


@contextlib.contextmanager
def _plain_environment() -> Iterator[None]:
    """A fixed width and no colour (newer Pythons colour argparse help on a terminal)."""
    saved = {key: os.environ.get(key) for key in ("COLUMNS", "NO_COLOR", "PYTHON_COLORS")}
    os.environ.update(COLUMNS=WIDTH, NO_COLOR="1", PYTHON_COLORS="0")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
