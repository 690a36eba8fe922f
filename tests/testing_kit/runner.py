"""Runs pytest in a subprocess on generated test files, as a user of the plugin would."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

#: the set-up docs/testing-control-planes.md documents: pytest-asyncio warns without the scope
INI = "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
SERVE = f"{sys.executable} -m xdsclient serve --port {{port}}"


async def run_pytest(
    directory: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """pytest's exit status and its output (stdout and stderr together)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args,
        cwd=directory, env={**os.environ, "GRPC_VERBOSITY": "NONE", **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode()
