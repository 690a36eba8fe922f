"""A control plane and a client of it for the `XdsChannel` tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from xdsclient import XdsClient
from xdsclient.testing import ControlPlane


@pytest.fixture
async def plane() -> AsyncIterator[ControlPlane]:
    async with ControlPlane() as control_plane:
        yield control_plane


@pytest.fixture
async def client(plane: ControlPlane) -> AsyncIterator[XdsClient]:
    async with XdsClient(plane.address, node_id="xds-channel") as xds_client:
        yield xds_client
