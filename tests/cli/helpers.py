"""Running ``python -m xdsclient`` in a subprocess, as an operator would, for the CLI tests."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys

ENV = {**os.environ, "GRPC_VERBOSITY": "NONE", "NO_COLOR": "1"}


async def cli(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of ``xdsclient ARGS...``; stderr never holds a
    traceback (every test checks it through here)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "xdsclient", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin), 30)
    assert process.returncode is not None
    assert "Traceback" not in err.decode()
    return process.returncode, out.decode(), err.decode()


async def started(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    """A CLI process and its first line of output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "xdsclient", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV,
    )  # fmt: skip
    assert process.stdout is not None
    first = await asyncio.wait_for(process.stdout.readline(), 30)
    return process, first.decode()


async def interrupted(process: asyncio.subprocess.Process) -> tuple[int, str]:
    """Ctrl-C: the exit status and stderr."""
    process.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, err.decode()


def one_error_line(err: str) -> str:
    """The single ``xdsclient:`` line on stderr (there must be exactly one, and no traceback)."""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("xdsclient:")]
    assert len(errors) == 1, err
    return errors[0]


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
