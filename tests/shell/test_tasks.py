"""Owned tasks and the import boundary of the core."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from tests.helpers import idle
from xdsclient._runtime._tasks import TaskOwner


async def test_a_failing_owned_task_is_logged_and_leaves_its_siblings_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = TaskOwner()
    sibling = owner.start(asyncio.Event().wait(), name="xdsclient-test-sibling")  # type: ignore[arg-type]

    async def broken() -> None:
        raise RuntimeError("bug")

    owner.start(broken(), name="xdsclient-test-broken")
    await idle()
    assert "xdsclient task xdsclient-test-broken failed" in caplog.text
    assert not sibling.done()
    await owner.close()
    assert sibling.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        owner.start(broken(), name="late")


def test_the_protocol_core_imports_without_grpc() -> None:
    code = (
        "import sys, xdsclient, xdsclient._protocol;"
        "assert 'grpc' not in sys.modules, [m for m in sys.modules if m.startswith('grpc')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
