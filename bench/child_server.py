"""A backend served by a child process for the benchmarks that compare clients over one
backend (bench/channel.py, bench/http.py).

Why a child: the backend's CPU then stays out of the process whose CPU per call is measured.
The child runs a script that prints its port, serves until its stdin closes, and stops.

`stop_child` and `stop_child_sync` are the one stop sequence (ask, grace period, kill, reap) of
every child a benchmark starts; the tests keep the same two in tests/children.py, since a
benchmark's ``--before`` run must import nothing newer than the checkout it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["served", "stop_child", "stop_child_sync"]


@contextlib.asynccontextmanager
async def served(script: str, *args: str) -> AsyncIterator[int]:
    """The port ``script`` (Python source, run with ``args``) prints, served by a child process
    until the context ends."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        yield int(await asyncio.wait_for(process.stdout.readline(), 30))
    finally:
        await stop_child(process)


async def stop_child(
    process: asyncio.subprocess.Process, *, grace: float = 5.0, terminate: bool = False
) -> int:
    """Stop ``process`` and reap it: its exit status. Unless it has ended, ask it to end
    (SIGTERM when ``terminate`` or it has no stdin pipe, else close its stdin), wait up to
    ``grace`` seconds, then kill it; ``grace`` 0 kills it at once."""
    if process.returncode is None and grace > 0:
        if terminate or process.stdin is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        else:
            process.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace)
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    if process.stdin is not None:
        process.stdin.close()  # no pipe left open once it is gone
    return await process.wait()


def stop_child_sync(
    process: subprocess.Popen[Any], *, grace: float = 5.0, terminate: bool = False
) -> int:
    """`stop_child` for a ``subprocess.Popen`` child (blocks up to ``grace`` seconds)."""
    if process.poll() is None and grace > 0:
        if terminate or process.stdin is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        else:
            process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    return process.wait()
