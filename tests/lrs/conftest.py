"""Fixtures for load reporting tests: the fake transport and the fake clock."""

from __future__ import annotations

import pytest

from xdsclient.testing import FakeClock, FakeTransport


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake() -> FakeTransport:
    return FakeTransport()
