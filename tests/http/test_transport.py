"""`XdsTransport` end to end: real HTTP backends on 127.0.0.1, the test control plane, and
``httpx.AsyncClient``: requests are routed by their authority and path, and answered locally
(404, 503) with the reason when they cannot be."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.helpers import eventually
from xdsclient import XdsClient
from xdsclient.httpx import ERROR_HEADER, XdsTransport
from xdsclient.resources import CLUSTER
from xdsclient.testing import (
    ControlPlane,
    FakeClock,
    HttpBackend,
    bootstrap,
    builders,
)

from .resources import LISTENER, cluster_of, resources, route_config, to, vhost

pytestmark = pytest.mark.timeout(30)


def answer(response: httpx.Response) -> str:
    """``<backend> <path>``: who answered a request, and the path it got."""
    body = response.json()
    return f"{body['backend']} {body['path']}"


async def test_requests_are_routed_by_their_authority_and_path(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """The Host picks the virtual host (exact before wildcard), the path the route: each
    request reaches the backend of its cluster, with the path and Host it was sent with."""
    a, b = two
    routes = route_config(
        vhost("reviews", ["reviews.svc"], to("b", "/api/"), to("a")),
        vhost("rest", ["*.svc"], to("a")),
    )
    cp.set_all(resources(routes, cluster_of("a", [a]), cluster_of("b", [b])))
    async with (
        XdsTransport(LISTENER, client=client) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        r = await http.get("http://reviews.svc/api/v1/products/7?x=1")
        assert (r.status_code, answer(r)) == (200, "b /api/v1/products/7?x=1")
        r = await http.get("http://reviews.svc/other")
        assert answer(r) == "a /other"
        r = await http.get("http://ratings.svc/")
        assert answer(r) == "a /"
    assert b.requests[0].header("host") == "reviews.svc"
    assert b.counts["/api/v1/products/7"] == 1


async def test_no_virtual_host_answers_404_and_says_why(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """A Host no virtual host matches answers 404 with the reason in the body and the
    ``x-xdsclient-error`` header, as Envoy's router answers; no backend sees it."""
    a, _ = two
    cp.set_all(resources(route_config(vhost("only", ["only.svc"], to("a"))), cluster_of("a", [a])))
    async with (
        XdsTransport(LISTENER, client=client) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        r = await http.get("http://elsewhere.svc/x")
    assert r.status_code == 404
    assert "no virtual host matches the authority elsewhere.svc" in r.headers[ERROR_HEADER]
    assert "elsewhere.svc" in r.text
    assert a.total == 0


async def test_a_missing_cluster_answers_503_naming_it(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """A route to a cluster the server does not have answers 503 naming the cluster and the
    reason; the routes to clusters it has keep working."""
    a, _ = two
    routes = route_config(vhost("v", ["*"], to("ghost", "/ghost"), to("a")))
    cp.set_all(resources(routes, cluster_of("a", [a])))
    async with (
        XdsTransport(LISTENER, client=client) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        assert answer(await http.get("http://svc/ok")) == "a /ok"
        r = await http.get("http://svc/ghost")
    assert r.status_code == 503
    assert "CDS resource ghost: does not exist" in r.headers[ERROR_HEADER]


async def test_without_a_client_the_transport_reads_the_bootstrap_and_closes_its_client(
    cp: ControlPlane, two: list[HttpBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No client: the transport makes one from ``GRPC_XDS_BOOTSTRAP_CONFIG`` as XdsChannel
    does, and ``aclose`` closes it; a request after that raises."""
    a, _ = two
    cp.set_all(resources(route_config(vhost("v", ["*"], to("a"))), cluster_of("a", [a])))
    monkeypatch.setenv("GRPC_XDS_BOOTSTRAP_CONFIG", json.dumps(bootstrap([cp], node_id="from-env")))
    transport = XdsTransport(LISTENER)
    async with httpx.AsyncClient(transport=transport) as http:
        assert answer(await http.get("http://svc/env")) == "a /env"
        assert transport.client.config.node.id == "from-env"
    assert transport.client.closed
    with pytest.raises(RuntimeError, match="closed"):
        await transport.handle_async_request(httpx.Request("GET", "http://svc/late"))


async def test_a_shared_client_stays_open_after_the_transport_closes(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """A client given is shared: closing the transport leaves it open."""
    a, _ = two
    cp.set_all(resources(route_config(vhost("v", ["*"], to("a"))), cluster_of("a", [a])))
    async with XdsTransport(LISTENER, client=client) as transport:
        assert transport.listener == LISTENER
    assert not client.closed


async def test_an_unknown_host_waits_for_its_virtual_host_on_demand(
    cp: ControlPlane, two: list[HttpBackend]
) -> None:
    """A route configuration with VHDS and no virtual hosts of its own: a request for a host
    the server knows waits for its virtual host (asked for on demand) and reaches its
    cluster; a host the server does not know answers 404."""
    a, _ = two
    routes = route_config()
    routes.vhds.config_source.ads.SetInParent()
    known = vhost(f"{routes.name}/x", ["x.io"], to("a"))
    cp.set_all([*resources(routes, cluster_of("a", [a])), known])
    async with (
        XdsClient(cp.address, node_id="vhds", delta=True) as client,
        XdsTransport(LISTENER, client=client) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        assert answer(await http.get("http://x.io/on-demand")) == "a /on-demand"
        r = await http.get("http://y.io/")
    assert r.status_code == 404
    assert "no virtual host matches the authority y.io" in r.headers[ERROR_HEADER]


async def test_an_authority_no_request_used_for_the_idle_timeout_is_released(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """The config watch of a host no request used for ``idle_timeout`` is released at a
    later request (on the transport's clock): the clusters only it reached are no longer
    subscribed; a host in use keeps its watch."""
    a, b = two
    routes = route_config(vhost("old", ["old.svc"], to("b")), vhost("new", ["new.svc"], to("a")))
    cp.set_all(resources(routes, cluster_of("a", [a]), cluster_of("b", [b])))
    clock = FakeClock()
    async with (
        XdsTransport(LISTENER, client=client, idle_timeout=10, _clock=clock) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        assert answer(await http.get("http://old.svc/")) == "b /"
        clock.advance(5)
        assert answer(await http.get("http://new.svc/")) == "a /"
        assert _subscribed(cp) == {"a", "b"}
        clock.advance(6)
        assert answer(await http.get("http://new.svc/")) == "a /"
        await eventually(lambda: _subscribed(cp) == {"a"}, what="b unsubscribed")


def _subscribed(cp: ControlPlane) -> set[str]:
    """The clusters the client's last CDS request names."""
    requests = [r for r in cp.requests if r.type_url == CLUSTER.type_url]
    return set(requests[-1].message.resource_names) if requests else set()


async def test_a_missing_listener_answers_503_naming_it(
    cp: ControlPlane, client: XdsClient
) -> None:
    """A listener the server does not have: requests answer 503 naming the LDS resource and
    that it does not exist (the client's does-not-exist timer, 1 s here, bounds the wait)."""
    async with (
        XdsTransport("nope", client=client) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        r = await http.get("http://svc/")
    assert r.status_code == 503
    assert "LDS resource nope: does not exist" in r.headers[ERROR_HEADER]


async def test_concurrent_requests_for_a_new_host_share_one_configuration(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """64 requests at once for a host not seen before all wait for its one config watch and
    all reach the backends."""
    a, b = two
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a, b])))
    async with (
        XdsTransport(LISTENER, client=client) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        answers = await asyncio.gather(*(http.get(f"http://svc/{i}") for i in range(64)))
    assert {r.status_code for r in answers} == {200}
    assert a.total + b.total == 64


async def test_connectivity_reports_of_many_endpoints_share_one_pass_over_them(
    cp: ControlPlane, client: XdsClient, two: list[HttpBackend]
) -> None:
    """An assignment of 400 endpoints (one backend, the others refusing on other loopback
    addresses): the first request is answered, every endpoint gets its pool (round robin
    connects all), and the picker's wanted endpoints are walked far fewer times than there
    are connectivity reports (each report walked all 400 before: quadratic in endpoints)."""
    a, _ = two
    refusing = [(f"127.0.{1 + i // 250}.{1 + i % 250}", a.port) for i in range(399)]
    found = resources(route_config(vhost("all", ["*"], to("a"))), cluster_of("a", [a]))
    found[-1] = builders.cluster_load_assignment("a", [("127.0.0.1", a.port), *refusing])
    cp.set_all(found)
    async with (
        XdsTransport(LISTENER, client=client) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        core = transport._core
        picker = core.picker
        counts = {"walks": 0, "reports": 0}
        wanted, report = picker.wanted_connections, picker.set_endpoint_state

        def walk() -> Any:
            counts["walks"] += 1
            return wanted()

        def reported(*args: Any) -> None:
            counts["reports"] += 1
            report(*args)

        picker.wanted_connections = walk  # type: ignore[method-assign]
        picker.set_endpoint_state = reported  # type: ignore[method-assign,assignment]
        r = await http.get("http://svc/first", timeout=10)
        assert answer(r) == "a /first"
        await eventually(lambda: len(core.connections) == 400, timeout=10)
        await eventually(lambda: counts["reports"] >= 400, timeout=10)  # each refused one fails
    assert counts["walks"] * 4 < counts["reports"], counts
