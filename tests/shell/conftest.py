"""Fixtures for shell tests: a client on the in-memory transport with a fake clock.

Nothing here touches a socket or waits on real time: the test plays the server through
`FakeStream`, and time moves only when the test advances the clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from xdsclient import Backoff, ClientOptions, XdsClient
from xdsclient.testing import FakeClock, FakeTransport

OPTIONS = ClientOptions(does_not_exist_timeout=15.0, backoff=Backoff(jitter=0.0))


@pytest.fixture(params=[False, True], ids=["sotw", "delta"])
def delta(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
async def client(fake: FakeTransport, clock: FakeClock, delta: bool) -> AsyncIterator[XdsClient]:
    async with XdsClient(
        "fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS, delta=delta
    ) as c:
        yield c
