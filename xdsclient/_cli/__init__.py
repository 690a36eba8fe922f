"""``python -m xdsclient`` and the ``xdsclient`` console script: ``demo``, ``serve``, ``watch``,
``dump``, ``check`` and ``load``.

Why a CLI: an operator or a control-plane author should be able to point the client at a
server, a bootstrap, a file or a REST endpoint and see what it gets, without writing code.
Errors are one line on stderr with a distinct exit status, never a traceback: the statuses are
`EXIT_STATUSES` (``--help`` prints them, the README has the same table, and a test holds the
two together). Output closed early (``| head``) ends quietly with 141, what a shell reports for
a tool killed by SIGPIPE; anything unforeseen is one line and 70 (sysexits' EX_SOFTWARE). A
subcommand is a module with a `Command`, and one line in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from .._compiled import is_compiled
from .._errors import XdsError
from .._version import __version__
from . import _check, _demo, _dump, _load, _watch
from ._common import (
    BROKEN_PIPE,
    CONFIG,
    INTERNAL,
    INTERRUPTED,
    CliError,
    Command,
    Parser,
    exit_status_epilog,
)

__all__ = ["COMMANDS", "Command", "main", "run"]

#: every subcommand, by name
COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        _demo.DEMO,
        _demo.SERVE,
        _watch.COMMAND,
        _dump.COMMAND,
        _check.COMMAND,
        _load.COMMAND,
    )
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
    except BrokenPipeError:
        _drop_stdout()
        return BROKEN_PIPE
    return status


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(COMMANDS[args.command].run(args))
    except CliError as exc:
        print(f"xdsclient: {exc}", file=sys.stderr)
        return exc.status
    except XdsError as exc:
        print(f"xdsclient: {exc}", file=sys.stderr)
        return CONFIG
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        raise
    except Exception as exc:  # a bug: still one line, with its own status
        print(f"xdsclient: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return INTERNAL


def _parser() -> argparse.ArgumentParser:
    epilog = exit_status_epilog()
    formatter = argparse.RawDescriptionHelpFormatter
    parser = Parser(prog="xdsclient", description="xdsclient tools", epilog=epilog,
                    formatter_class=formatter)  # fmt: skip
    build = "compiled" if is_compiled() else "pure Python"
    parser.add_argument("--version", action="version", version=f"xdsclient {__version__} ({build})")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_arguments(commands.add_parser(command.name, help=command.help,
                                                  description=command.help, epilog=epilog,
                                                  formatter_class=formatter))  # fmt: skip
    return parser


def _drop_stdout() -> None:
    """The Python docs' recipe for SIGPIPE: point stdout at devnull, so the interpreter's own
    flush at exit finds nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def run() -> None:
    """The ``xdsclient`` console script."""
    sys.exit(main())
