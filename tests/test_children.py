"""Stopping a child process (`tests.children`): a child that ends when asked is
reaped with its own status, one that ignores the request is killed after the grace period, a
child already gone is only reaped; async and sync alike, with real child processes."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import pytest

from tests.children import stop_child, stop_child_sync

pytestmark = pytest.mark.timeout(30)

#: ends with status 3 once its stdin closes
_ENDS_AT_EOF = "import sys; sys.stdin.read(); sys.exit(3)"
#: ignores its stdin and SIGTERM, says it is ready, then sleeps
_STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


async def _spawn(script: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_a_child_ending_at_the_close_of_its_stdin_gives_its_own_status() -> None:
    """A child that exits with status 3 once its stdin closes is stopped with that status."""
    process = await _spawn(_ENDS_AT_EOF)
    assert await stop_child(process) == 3


async def test_a_child_ignoring_the_request_is_killed_after_the_grace_period() -> None:
    """A child ignoring its stdin's close and SIGTERM is killed once the grace period is over:
    not before it (about 0.3 s), and reaped (SIGKILL's status)."""
    for terminate in (False, True):
        process = await _spawn(_STUBBORN)
        assert process.stdout is not None
        assert await asyncio.wait_for(process.stdout.readline(), 10) == b"ready\n"
        started = time.monotonic()
        assert await stop_child(process, grace=0.3, terminate=terminate) == -signal.SIGKILL
        assert time.monotonic() - started >= 0.3


async def test_a_child_already_gone_is_reaped_and_a_zero_grace_kills_at_once() -> None:
    """A child that has already exited gives its status without a signal; ``grace`` 0 kills
    a running child without waiting."""
    process = await _spawn("import sys; sys.exit(5)")
    await process.wait()
    assert await stop_child(process) == 5
    process = await _spawn(_STUBBORN)
    assert await stop_child(process, grace=0) == -signal.SIGKILL


def test_the_sync_stop_asks_then_kills_a_popen_child() -> None:
    """For a ``Popen`` child: its own status when it ends at the close of its stdin,
    SIGTERM's when asked by signal, SIGKILL's after the grace period when it ignores both."""
    ends = subprocess.Popen([sys.executable, "-c", _ENDS_AT_EOF], stdin=subprocess.PIPE)
    assert stop_child_sync(ends) == 3
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert stop_child_sync(sleeper) == -signal.SIGTERM  # no stdin pipe: SIGTERM
    stubborn = subprocess.Popen(
        [sys.executable, "-c", _STUBBORN], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert stubborn.stdout is not None
    assert stubborn.stdout.readline() == b"ready\n"
    assert stop_child_sync(stubborn, grace=0.3) == -signal.SIGKILL
    stubborn.stdout.close()
