"""Every exit status of the command line, as one table: the README's table and ``--help`` are
`EXIT_STATUSES`, and each status is produced here, in a subprocess, with its exact output."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.cli.helpers import ENV, cli, closed_port, interrupted, one_error_line, started
from xdsclient._cli._common import EXIT_STATUSES
from xdsclient.testing import ControlPlane, SeededBug

README = Path(__file__).parents[2] / "README.md"


def readme_table() -> list[tuple[int, str]]:
    section = README.read_text().split("### Exit statuses", 1)[1].split("\n## ", 1)[0]
    return [(int(s), meaning) for s, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)]


def test_the_readme_table_is_the_exit_status_table() -> None:
    """The README's exit-status table lists exactly `EXIT_STATUSES`, in order."""
    assert readme_table() == list(EXIT_STATUSES)


@pytest.mark.parametrize("command", [[], ["watch"], ["dump"]])
async def test_help_ends_with_the_exit_status_table(command: list[str]) -> None:
    """``--help`` of the program and of each subcommand prints the same table."""
    status, out, _ = await cli(*command, "--help")
    assert status == 0
    table = out.split("exit status:\n", 1)[1]
    rows = [(int(s), m) for s, m in re.findall(r"^ +(\d+)  (.+)$", table, re.M)]
    assert rows == list(EXIT_STATUSES)


async def _ok(cp: ControlPlane) -> str:
    status, out, err = await cli("watch", "cluster", "c", "--server", cp.address, "--count", "1")
    assert (status, err) == (0, "")
    assert out.startswith("changed  Cluster c: version ")
    return ""


async def _must_failed(_: ControlPlane) -> str:
    async with ControlPlane(bugs={SeededBug.NO_NONCE}) as bad:
        bad.set_all([])
        status, out, err = await cli("check", "--server", bad.address, "--variants", "ads-sotw",
                                     "--quiet-window", "0.3", "--timeout", "1.5")  # fmt: skip
    assert status == 1
    assert "FAIL nonce-present (MUST" in out
    return one_error_line(err)


async def _usage(_: ControlPlane) -> str:
    status, out, err = await cli("watch", "cluster", "c", "--server", "127.0.0.1:1", "--count",
                                 "0")  # fmt: skip
    assert (status, out) == (2, "")
    return one_error_line(err)


async def _configuration(_: ControlPlane) -> str:
    status, out, err = await cli("dump", "--listener", "l", "--bootstrap", "/nonexistent.json")
    assert (status, out) == (3, "")
    return one_error_line(err)


async def _unavailable(_: ControlPlane) -> str:
    status, out, err = await cli("dump", "--listener", "l", "--server",
                                 f"127.0.0.1:{closed_port()}", "--timeout", "0.5")  # fmt: skip
    assert status == 4
    assert "REQUESTED" in out
    assert len(err.splitlines()) == 1  # not the library's WARNING as well
    return one_error_line(err)


async def _incomplete(cp: ControlPlane) -> str:
    status, out, err = await cli("dump", "--resource", "cluster:bad", "--server", cp.address)
    assert status == 5
    assert "NACKED" in out
    return one_error_line(err)


async def _not_served(_: ControlPlane) -> str:
    async with ControlPlane() as empty:
        status, _out, err = await cli("check", "--server", empty.address, "--variants", "ads-sotw",
                                      "--quiet-window", "0.3", "--timeout", "1.5")  # fmt: skip
    assert status == 6
    return one_error_line(err)


async def _internal(_: ControlPlane) -> str:
    program = (
        "import sys\n"
        "from xdsclient import _cli\n"
        "async def boom(args):\n"
        "    raise RuntimeError('a bug')\n"
        "_cli.COMMANDS['demo'] = _cli.Command('demo', 'x', lambda parser: None, boom)\n"
        "sys.exit(_cli.main(['demo']))\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", program, env=ENV,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert (process.returncode, out) == (70, b"")
    return one_error_line(err.decode())


async def _interrupted(cp: ControlPlane) -> str:
    process, first = await started("watch", "cluster", "c", "--server", cp.address)
    assert first.startswith("changed  Cluster c")
    status, err = await interrupted(process)
    assert (status, err) == (130, "")
    return ""


async def _broken_pipe(cp: ControlPlane) -> str:
    """stdout is a pipe nobody reads any more: the first write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "xdsclient", "watch", "cluster", "c", "d",
            "--server", cp.address, env=ENV, stdout=write_end, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert (process.returncode, err) == (141, b"")
    return ""


CASES: dict[int, tuple[Callable[[ControlPlane], Awaitable[str]], str]] = {
    0: (_ok, ""),
    1: (_must_failed, "xdsclient: a MUST rule failed"),
    2: (_usage, "xdsclient: argument --count: '0': must be above 0 (see xdsclient watch --help)"),
    3: (_configuration, "xdsclient: cannot read bootstrap"),
    4: (_unavailable, "xdsclient: incomplete after 0.5 s: xDS stream to 127.0.0.1:"),
    5: (_incomplete, "xdsclient: not usable: Cluster bad (NACKED: invalid resource: "),
    6: (_not_served, "xdsclient: nothing to check at 127.0.0.1:"),
    70: (_internal, "xdsclient: internal error: RuntimeError: a bug"),
    130: (_interrupted, ""),
    141: (_broken_pipe, ""),
}


def test_every_status_in_the_table_has_a_case() -> None:
    """No exit status is documented without being produced below, and none is produced that
    the table does not document."""
    assert sorted(CASES) == sorted(status for status, _ in EXIT_STATUSES)


@pytest.mark.parametrize("status", sorted(CASES))
async def test_each_exit_status_is_produced_with_its_one_line(
    status: int, cp: ControlPlane
) -> None:
    """Each documented status comes from its case, with exactly its one stderr line (or none),
    and never a traceback."""
    case, line = CASES[status]
    got = await case(cp)
    assert got.startswith(line) if line else got == ""


@pytest.mark.parametrize(
    "command", [["watch", "--listener", "l"], ["watch", "cluster", "c"], ["dump", "--resource",
                                                                          "cluster:c"]]
)  # fmt: skip
async def test_an_unreachable_server_is_one_line_naming_why_nothing_arrived(
    command: list[str],
) -> None:
    """The failure line says why nothing arrived (the server's failure, as gRPC put it); the
    library's own "server lost" WARNING is not printed beside it."""
    port = closed_port()
    status, _, err = await cli(*command, "--server", f"127.0.0.1:{port}", "--timeout", "0.5")
    assert status == 4
    (line,) = err.splitlines()
    assert re.match(rf"xdsclient: .*: xDS stream to 127\.0\.0\.1:{port} failed: UNAVAILABLE", line)
