"""Fixtures the HTTP transport's end-to-end tests share: a client of the test control plane that
knows a missing resource after 1 s, and real HTTP backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from xdsclient import ClientOptions, XdsClient
from xdsclient.httpx import XdsTransport
from xdsclient.testing import ControlPlane, HttpBackend, http_backends


@pytest.fixture
async def client(cp: ControlPlane) -> AsyncIterator[XdsClient]:
    """A client of ``cp``; a missing cluster is known within a second."""
    options = ClientOptions(does_not_exist_timeout=1.0)
    async with XdsClient(cp.address, node_id="xds-http", options=options) as xds_client:
        yield xds_client


@pytest.fixture
async def two() -> AsyncIterator[list[HttpBackend]]:
    """Backends ``a`` and ``b``."""
    async with http_backends(names=("a", "b")) as started:
        yield started


@pytest.fixture
async def three() -> AsyncIterator[list[HttpBackend]]:
    """Backends ``a``, ``b`` and ``c``."""
    async with http_backends(names=("a", "b", "c")) as started:
        yield started


def http_of(transport: XdsTransport) -> httpx.AsyncClient:
    """An httpx client over ``transport``, with room for a loaded machine."""
    return httpx.AsyncClient(transport=transport, timeout=10)
