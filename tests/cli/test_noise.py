"""A server that stays unreachable is one line in ``xdsclient watch``, not one per retry.

In-process, on the fake transport and clock: a test of "nothing more is printed" must not wait
in real time, so it drives `_event_lines` (what ``watch TYPE NAME`` prints) over a client whose
retries the test moves through by advancing the clock.
"""

from __future__ import annotations

import argparse
import asyncio

from tests.helpers import idle
from tests.shell.conftest import OPTIONS
from xdsclient import XdsClient
from xdsclient._cli._watch import _event_lines
from xdsclient.resources import CLUSTER
from xdsclient.testing import FakeClock, FakeTransport


async def test_an_error_repeated_by_every_retry_is_printed_once() -> None:
    """Retries failing the same way print nothing new; a different failure prints a line."""
    fake, clock = FakeTransport(), FakeClock()
    fake.refuse("connection refused")
    args = argparse.Namespace(names=["c"], json=False)
    async with XdsClient("fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS) as c:
        lines = _event_lines(c, CLUSTER, args)
        async with asyncio.timeout(5):
            first = await anext(lines)
        assert first == "error    Cluster c: connection refused"
        reader = asyncio.ensure_future(anext(lines))
        for _ in range(4):  # four backoff cycles, each refused alike
            clock.advance(200)
            await idle()
        assert fake.open_attempts >= 5  # the client did retry
        assert not reader.done()
        fake.refuse("no route to host")
        clock.advance(200)
        async with asyncio.timeout(5):
            assert await reader == "error    Cluster c: no route to host"
        await lines.aclose()
