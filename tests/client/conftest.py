"""Fixtures for end-to-end tests: a real control plane on loopback and a client per variant."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypedDict

import pytest

# Re-exported for the tests that still import it from here (tests/reliability).
from tests.helpers import eventually as eventually
from xdsclient import Backoff, ClientOptions, Event, XdsClient
from xdsclient.testing import ControlPlane

VARIANTS = [
    pytest.param({"ads": True, "delta": False}, id="ads-sotw"),
    pytest.param({"ads": True, "delta": True}, id="ads-delta"),
    pytest.param({"ads": False, "delta": False}, id="xds-sotw"),
    pytest.param({"ads": False, "delta": True}, id="xds-delta"),
]
FAST_BACKOFF = Backoff(initial=0.05, maximum=0.2)


class Variant(TypedDict):
    """The transport variant keywords of `XdsClient`."""

    ads: bool
    delta: bool


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> Variant:
    return Variant(ads=request.param["ads"], delta=request.param["delta"])


@pytest.fixture
async def client(control_plane: ControlPlane, variant: Variant) -> AsyncIterator[XdsClient]:
    async with XdsClient(
        control_plane.address,
        node_id="test-node",
        options=ClientOptions(does_not_exist_timeout=1.0, backoff=FAST_BACKOFF),
        **variant,
    ) as c:
        yield c


async def next_event(updates: AsyncIterator[Event], timeout: float = 5.0) -> Event:
    """The next event of a watch, or fail after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        return await anext(updates)
