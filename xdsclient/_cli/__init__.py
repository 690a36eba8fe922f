"""``python -m xdsclient`` and the ``xdsclient`` console script: ``demo``, ``serve``, ``watch``,
``dump`` and ``check``.

Why a CLI: an operator or a control-plane author should be able to point the client at a
server, a bootstrap, a file or a REST endpoint and see what it gets, without writing code.
Errors are one line on stderr with a distinct exit status, never a traceback:
0 ok, 2 bad arguments, 3 bad configuration (bootstrap, file, names, a missing extra),
4 nothing usable arrived (unreachable, timed out), 5 ``dump`` found NACKed or missing
resources, 1 ``check`` found a MUST rule failing, 130 Ctrl-C. A subcommand is a module with
a `Command`, and one line in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from .._errors import XdsError
from . import _check, _demo, _dump, _watch
from ._common import CONFIG, INTERRUPTED, CliError, Command

__all__ = ["COMMANDS", "Command", "main", "run"]

#: every subcommand, by name
COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (_demo.DEMO, _demo.SERVE, _watch.COMMAND, _dump.COMMAND, _check.COMMAND)
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    from .. import __version__

    parser = argparse.ArgumentParser(prog="xdsclient", description="xdsclient tools")
    parser.add_argument("--version", action="version", version=f"xdsclient {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_arguments(commands.add_parser(command.name, help=command.help,
                                                  description=command.help))  # fmt: skip
    args = parser.parse_args(argv)
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


def run() -> None:
    """The ``xdsclient`` console script."""
    sys.exit(main())
