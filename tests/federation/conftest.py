"""Fixtures for federation tests: every transport variant, the fake transport and clock."""

from __future__ import annotations

import pytest

from tests.client.conftest import VARIANTS, Variant
from xdsclient.testing import FakeClock, FakeTransport


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> Variant:
    return Variant(ads=request.param["ads"], delta=request.param["delta"])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake() -> FakeTransport:
    return FakeTransport()
