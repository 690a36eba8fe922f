"""A control plane and a client of it for the `XdsChannel` tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from xdsclient import XdsClient
from xdsclient.testing import ControlPlane


@pytest.fixture
def plane(cp: ControlPlane) -> ControlPlane:
    """The suite's control plane (``cp``, tests/conftest.py), under the name these tests use."""
    return cp


@pytest.fixture
async def client(plane: ControlPlane) -> AsyncIterator[XdsClient]:
    async with XdsClient(plane.address, node_id="xds-channel") as xds_client:
        yield xds_client
