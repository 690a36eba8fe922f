"""The sync tests' control plane: the real test `ControlPlane`, run on a `LoopThread` of its own.

A sync test blocks the thread it runs on, so the control plane cannot share pytest's event loop
(that loop does not run while a sync test does); it gets a loop thread, and the test drives it
through `Plane`, which runs each change on that loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from xdsclient.sync import LoopThread
from xdsclient.testing import ControlPlane

T = TypeVar("T")


class Plane:
    """A `ControlPlane` on its own loop thread, changed from synchronous code."""

    def __init__(self, thread: LoopThread, server: ControlPlane) -> None:
        self.thread = thread
        self.server = server
        self.address = server.address

    def set(self, *resources: Any) -> None:
        """Serve these resources (added or replaced), with one wake-up of the streams."""
        self.thread.call(self.server.set_all, resources)

    def remove(self, type_url: str, name: str) -> None:
        """Delete a resource."""
        self.thread.call(self.server.remove, type_url, name)


async def _started(server: ControlPlane) -> ControlPlane:
    await server.start()
    return server


@pytest.fixture
def plane() -> Iterator[Plane]:
    """A control plane on 127.0.0.1 serving nothing yet, on its own loop thread."""
    with LoopThread(name="test-control-plane") as thread:
        server = thread.run(_started(ControlPlane()))
        try:
            yield Plane(thread, server)
        finally:
            thread.run(server.stop())


def until(condition: Callable[[], T], timeout: float = 5.0, *, what: str) -> T:
    """Poll ``condition`` from a sync test until it returns something true (real I/O
    announces nothing): the sync twin of ``tests.helpers.eventually``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(0.01)
    raise AssertionError(f"{what}: not within {timeout:g}s (last: {last!r})")
