"""Stopping a child process a test started: ask it to end, give it a grace period, kill it,
reap it.

Why one helper: every test that starts a child (a backend, a grpcio client, a load worker)
needs the same four steps at its end, in the same order, and each hand-written copy gets one
corner wrong: a child that ignores its request outlives the run, a child already gone raises
ProcessLookupError from the kill, or one never reaped leaves a zombie and a ResourceWarning.
How a child is asked to end is its own protocol: closing its stdin (the children here serve
until their stdin closes) or SIGTERM. Async for ``asyncio`` subprocesses, sync for ``Popen``.
(The benchmarks keep the same two functions in bench/child_server.py: a benchmark's
``--before`` run imports nothing newer than the checkout it measures, and bench/ imports
nothing from tests/.)
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from typing import Any

__all__ = ["stop_child", "stop_child_sync"]


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
