"""`XdsTransport` follows Envoy's outlier detection end to end, over real backends: a backend
answering 503 is ejected after five in a row (Envoy's default ``consecutive_5xx``, before any
interval sweep), traffic moves to the others, and it comes back after ``base_ejection_time``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import pytest

from xdsclient import ClientOptions, XdsClient
from xdsclient.httpx import XdsTransport
from xdsclient.testing import Behaviour, ControlPlane, HttpBackend, http_backends

from .resources import LISTENER, cluster_of, resources, route_config, to, vhost

pytestmark = pytest.mark.timeout(30)

#: how long an ejection lasts here (short: the transport reads the loop's real clock)
BASE_EJECTION = 0.5


@pytest.fixture
async def client(cp: ControlPlane) -> AsyncIterator[XdsClient]:
    options = ClientOptions(does_not_exist_timeout=1.0)
    async with XdsClient(cp.address, node_id="xds-outlier", options=options) as xds_client:
        yield xds_client


@pytest.fixture
async def three() -> AsyncIterator[list[HttpBackend]]:
    async with http_backends(names=("a", "b", "c")) as started:
        yield started


async def get(http: httpx.AsyncClient, count: int) -> list[int]:
    return [(await http.get("http://svc/")).status_code for _ in range(count)]


async def test_five_503_in_a_row_eject_a_backend_until_base_ejection_time(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """Round robin over three: backend a answers its first five requests 503; the fifth
    ejects it, the next requests reach only b and c, and after ``base_ejection_time`` (at the
    first sweep after it) a answers again."""
    a, b, c = three
    cluster, assignment = cluster_of("c", three)
    detection = cluster.outlier_detection
    detection.interval.FromMilliseconds(100)
    detection.base_ejection_time.FromMilliseconds(int(BASE_EJECTION * 1000))
    detection.max_ejection_percent.value = 50  # Envoy's 10 % would let none of three go
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), [cluster, assignment]))
    a.script("*", *[Behaviour(status=503)] * 5, then=Behaviour(status=200))
    async with (
        XdsTransport(LISTENER, client=client) as transport,
        httpx.AsyncClient(transport=transport, timeout=10) as http,
    ):
        statuses = await get(http, 15)
        ejected_by = time.monotonic()
        assert statuses.count(503) == 5
        assert a.total == 5
        assert await get(http, 10) == [200] * 10
        assert a.total == 5  # ejected: b and c took them
        assert b.total + c.total == 20
        while a.total == 5:
            assert time.monotonic() - ejected_by < 5, "backend a never came back"
            assert await get(http, 1) == [200]
        assert time.monotonic() - ejected_by >= BASE_EJECTION
