"""Repeated requests to one authority and path, which `XdsTransport` sends without a plan of
their own once the route fixes it (`DirectRoute`), end as planned ones do: a timeout, a
refused endpoint, the router's retry headers and a streamed body, each on the second and
later requests, over real backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from xdsclient import XdsClient
from xdsclient._call._http_retry import CONSUMED_HEADERS
from xdsclient.httpx import ERROR_HEADER, XdsTransport
from xdsclient.testing import Behaviour, ControlPlane, HttpBackend

from .conftest import http_of
from .resources import LISTENER, cluster_of, resources, route_config, to, vhost
from .test_connections import free_port

pytestmark = pytest.mark.timeout(30)


async def test_each_repeated_request_past_the_routes_timeout_answers_504(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """A route with a 200 ms timeout to a backend that holds ``/hold``: the first request
    and the next two (direct) all answer Envoy's 504 ``upstream request timeout``, and
    ``/ok`` on the same route still answers."""
    a, _ = two
    a.script("/hold", then=Behaviour(delay=5))
    route = to("c")
    route.route.timeout.FromMilliseconds(200)
    cp.set_all(resources(route_config(vhost("v", ["*"], route)), cluster_of("c", [a])))
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        for _ in range(3):
            r = await http.get("http://svc/hold")
            assert (r.status_code, r.content) == (504, b"upstream request timeout")
            assert (await http.get("http://svc/ok")).status_code == 200
    assert a.counts["/hold"] == 3


async def test_each_repeated_request_to_a_refusing_endpoint_answers_503_naming_it(
    cp: ControlPlane, client: XdsClient
) -> None:
    """A cluster whose one endpoint refuses connections: every request, the repeated ones
    too, answers 503 naming the endpoint."""
    port = free_port()
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [_Port(port)])))
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        for _ in range(3):
            r = await http.get("http://svc/x")
            assert r.status_code == 503
            assert f"127.0.0.1:{port}" in r.headers.get(ERROR_HEADER, r.text)


class _Port:
    def __init__(self, port: int) -> None:
        self.port = port


async def test_the_retry_headers_of_a_repeated_request_are_read_and_not_forwarded(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """A route without a retry policy, one backend answering 503: after a first request
    without them, requests carrying ``x-envoy-retry-on: 5xx`` and ``x-envoy-max-retries``
    are retried on the other backend (counted at both) and neither backend sees the
    headers."""
    a, b = two
    a.script("*", then=Behaviour(status=503))
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a, b])))
    headers = {"x-envoy-retry-on": "5xx", "x-envoy-max-retries": "3"}
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        first = [(await http.get("http://svc/x")).status_code for _ in range(20)]
        assert set(first) == {200, 503}  # round robin over both, no retry
        before = a.total
        for _ in range(6):
            assert (await http.get("http://svc/x", headers=headers)).status_code == 200
    assert a.total - before >= 2  # requests retried: their first attempt went there
    seen = a.requests + b.requests
    assert all(r.header("x-envoy-retry-on") is None for r in seen)
    assert all(r.header("x-envoy-max-retries") is None for r in seen)


@pytest.mark.parametrize("name", CONSUMED_HEADERS)
async def test_each_consumed_retry_header_alone_is_not_forwarded_on_a_repeated_request(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend], name: str
) -> None:
    """After a first request to a path (its plan fixed from then on), a request carrying only
    ``name``, one of the retry headers Envoy's router consumes, is planned: the backend gets
    it without that header."""
    a, _ = two
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a])))
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        assert (await http.get("http://svc/x")).status_code == 200
        assert (await http.get("http://svc/x", headers={name: "503"})).status_code == 200
    assert [r.header(name) for r in a.requests] == [None, None]


async def test_a_repeated_request_with_a_streamed_body_sends_it_once(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """Requests to one path with a body given whole and as a stream: each body reaches the
    backend as sent, the stream once."""
    a, _ = two
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a])))

    async def chunks(part: bytes) -> AsyncIterator[bytes]:
        yield part
        yield b"-end"

    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        for number in range(3):
            r = await http.post("http://svc/p", content=f"whole{number}".encode())
            assert r.status_code == 200
            r = await http.post("http://svc/p", content=chunks(f"stream{number}".encode()))
            assert r.status_code == 200
    assert [r.body for r in a.requests] == [
        body for n in range(3) for body in (f"whole{n}".encode(), f"stream{n}-end".encode())
    ]
