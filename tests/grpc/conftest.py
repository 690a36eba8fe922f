"""A control plane and a client of it for the `XdsChannel` tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from xdsclient import XdsClient
from xdsclient.grpc import _direct
from xdsclient.testing import ControlPlane


@pytest.fixture
def plane(cp: ControlPlane) -> ControlPlane:
    """The suite's control plane (``cp``, tests/conftest.py), under the name these tests use."""
    return cp


@pytest.fixture
async def client(plane: ControlPlane) -> AsyncIterator[XdsClient]:
    async with XdsClient(plane.address, node_id="xds-channel") as xds_client:
        yield xds_client


@pytest.fixture(params=["direct", "fallback"])
def unary_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each unary call test twice: with direct unary calls, and with the guard on grpc.aio's
    private parts forced off (every unary call an `XdsCall`, as where those parts differ)."""
    if request.param == "fallback":
        monkeypatch.setattr(_direct, "USABLE", False)
    return str(request.param)
