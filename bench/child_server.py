"""A backend served by a child process for the benchmarks that compare clients over one
backend (bench/channel.py, bench/http.py).

Why a child: the backend's CPU then stays out of the process whose CPU per call is measured.
The child runs a script that prints its port, serves until its stdin closes, and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

from xdsclient.testing._children import stop_child

__all__ = ["served"]


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
