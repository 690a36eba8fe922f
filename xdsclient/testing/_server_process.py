"""The server under test as a child process: started from a command line, ready once its port
accepts connections, stopped at the end, its output kept for the report of a failing test.

Why ours: every control-plane team otherwise writes the same forty lines of conftest (Popen,
poll the port, terminate, kill, dump the log), and gets the corners wrong: a server that dies
at start-up is waited for until the timeout, a server that ignores SIGTERM outlives the run,
and a failure report says nothing of what the server printed. Plain synchronous code: the
pytest plugin runs it from a session fixture, outside any event loop.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

from .._errors import XdsError

__all__ = ["ServerProcess", "ServerStartError", "free_port"]

_POLL = 0.05  # seconds between readiness probes
_STOP_GRACE = 5.0  # seconds from SIGTERM to SIGKILL
_TAIL = 16_384  # characters of output shown in a failure report


class ServerStartError(XdsError):
    """Local: the server command exited, or its port did not accept connections in time
    (the message says which, then what the command printed)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS's pick; free until someone else takes it)."""
    with socket.create_server((host, 0)) as probe:
        port: int = probe.getsockname()[1]
        return port


class ServerProcess:
    """``command`` (split as a shell would, not run through one) started by `start`, its
    stdout and stderr written to ``log``; ready once ``host:port`` accepts a connection."""

    def __init__(self, command: str, *, host: str, port: int, log: Path) -> None:
        self.command = command
        self.host = host
        self.port = port
        self.log = log
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port`` the server under test listens on."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The child's process id once started."""
        return None if self._process is None else self._process.pid

    def output(self, limit: int = _TAIL) -> str:
        """What the server printed so far (its last ``limit`` characters)."""
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return text if len(text) <= limit else "...\n" + text[-limit:]

    def start(self, timeout: float) -> None:
        """Start the command and wait until its port accepts connections; raises
        `ServerStartError` (and stops the child) when it exits first or ``timeout`` passes."""
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:
            raise ServerStartError(f"cannot parse the server command: {exc}") from None
        if not argv:
            raise ServerStartError("the server command is empty")
        with self.log.open("wb") as log:
            try:
                self._process = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stopped with its children
                )  # fmt: skip
            except OSError as exc:
                raise ServerStartError(f"cannot run {argv[0]!r}: {exc.strerror}") from None
        failure = self._wait_ready(time.monotonic() + timeout, timeout)
        if failure is not None:
            self.stop()
            raise ServerStartError(f"{failure}; its output:\n{self.output()}")

    def _wait_ready(self, deadline: float, timeout: float) -> str | None:
        """None once the port accepts a connection, else why not."""
        assert self._process is not None
        while True:
            code = self._process.poll()
            if code is not None:
                return f"the server command exited with status {code} before {self.address} was up"
            try:
                with socket.create_connection((self.host, self.port), timeout=_POLL):
                    return None
            except OSError:
                pass
            if time.monotonic() >= deadline:
                return f"the server did not listen on {self.address} within {timeout:g}s"
            time.sleep(_POLL)

    def stop(self) -> int | None:
        """SIGTERM to the server's process group, SIGKILL after a grace period; returns its
        exit status (None if it never started)."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                return process.wait(_STOP_GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
        return process.wait()


def _signal_group(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(pid, signum)
