"""Fixtures for on-demand tests: a client on the in-memory transport with a fake clock, in
both variants (Delta only where the rule is Delta's)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from xdsclient import Backoff, ClientOptions, XdsClient
from xdsclient.testing import FakeClock, FakeTransport

#: the grace period the tests use (the default is 30 s; a test shows it is the option's)
GRACE = 20.0
OPTIONS = ClientOptions(
    does_not_exist_timeout=15.0, backoff=Backoff(jitter=0.0), on_demand_grace=GRACE
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake() -> FakeTransport:
    return FakeTransport()


@pytest.fixture(params=[False, True], ids=["sotw", "delta"])
def delta(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
async def client(fake: FakeTransport, clock: FakeClock, delta: bool) -> AsyncIterator[XdsClient]:
    async with XdsClient(
        "fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS, delta=delta
    ) as c:
        yield c


@pytest.fixture
async def delta_client(fake: FakeTransport, clock: FakeClock) -> AsyncIterator[XdsClient]:
    async with XdsClient(
        "fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS, delta=True
    ) as c:
        yield c
