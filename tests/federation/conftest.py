"""Fixtures for federation tests: every transport variant, the fake transport and clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.client.conftest import VARIANTS, Variant
from xdsclient.testing import ControlPlane, FakeClock, FakeTransport


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> Variant:
    return Variant(ads=request.param["ads"], delta=request.param["delta"])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake() -> FakeTransport:
    return FakeTransport()


@pytest.fixture
async def control_plane() -> AsyncIterator[ControlPlane]:
    async with ControlPlane() as cp:
        yield cp
