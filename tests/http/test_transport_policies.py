"""`XdsTransport` applies what the configuration says, end to end over real backends: a
weighted split, retries (counted at the backends), fault aborts at their rate, ring-hash
stickiness by header, load reports reaching the control plane, outlier ejection from real
outcomes, a NACK keeping the last configuration, and a streamed response body."""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from envoy.config.route.v3 import route_components_pb2
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2

from tests.call.builders import fault
from tests.helpers import eventually
from xdsclient import XdsClient
from xdsclient.httpx import ERROR_HEADER, XdsTransport
from xdsclient.testing import Behaviour, ControlPlane, FakeClock, HttpBackend

from ..lrs.test_end_to_end import _totals
from .backends import streaming_backend
from .conftest import http_of
from .resources import LISTENER, cluster_of, resources, route_config, to, vhost

pytestmark = pytest.mark.timeout(30)


def answering(backend: HttpBackend, status: int, path: str = "*") -> None:
    """``backend`` answers every request (to ``path``) with ``status`` from now on."""
    backend.script(path, then=Behaviour(status=status))


def holding(backend: HttpBackend, path: str = "/hold") -> None:
    """``backend`` answers requests to ``path`` only after 5 s."""
    backend.script(path, then=Behaviour(delay=5))


def retrying(retry_on: str) -> Any:
    """A route to cluster ``c`` retrying twice on ``retry_on``, 1 ms apart."""
    route = to("c")
    policy = route.route.retry_policy
    policy.retry_on = retry_on
    policy.num_retries.value = 2
    policy.retry_back_off.base_interval.FromMilliseconds(1)
    return route


async def answers(
    http: httpx.AsyncClient, count: int, url: str = "http://svc/", **kw: Any
) -> collections.Counter[str]:
    """``count`` GETs of ``url``: which backend answered, or the status when none did."""
    seen: collections.Counter[str] = collections.Counter()
    for _ in range(count):
        r = await http.get(url, **kw)
        seen[r.headers.get("x-backend", str(r.status_code))] += 1
    return seen


async def test_a_weighted_split_sends_each_cluster_its_share(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """Weights 80/20 over 400 requests: each cluster gets its share within 4 standard
    deviations (binomial, sd 8)."""
    a, b, _ = three
    route = route_components_pb2.Route()
    route.match.prefix = "/"
    for name, weight in (("a", 80), ("b", 20)):
        route.route.weighted_clusters.clusters.add(name=name).weight.value = weight
    cp.set_all(
        resources(
            route_config(vhost("v", ["*"], route)), cluster_of("a", [a]), cluster_of("b", [b])
        )
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        seen = await answers(http, 400)
    assert abs(seen["b"] - 80) <= 32
    assert seen["a"] + seen["b"] == 400


async def test_retries_reach_the_backends_each_with_a_new_pick(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """``retry_on: 5xx`` with 2 retries: a request to a cluster whose backends all answer 503
    is tried 3 times (counted at the backends) and answers the last 503; with one healthy
    backend beside a failing one every request ends 200, the retry picking anew."""
    a, b, _ = three
    route = retrying("5xx")
    cp.set_all(resources(route_config(vhost("v", ["*"], route)), cluster_of("c", [a, b])))
    answering(a, 503)
    answering(b, 503)
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        r = await http.get("http://svc/x")
        assert r.status_code == 503
        assert a.total + b.total == 3
        b.clear()
        seen = await answers(http, 10)
    assert seen == {"b": 10}


async def test_a_fault_abort_answers_its_status_at_its_rate(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """The HTTP fault filter aborting 30% with 503: of 300 requests, the aborted share is
    within 4 standard deviations (sd ~7.9), and only the others reach the backend."""
    a, _, _ = three
    abort = fault(abort_http=503, abort_percent=(30, 0))
    cp.set_all(
        resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a]), faults=[abort])
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        seen = await answers(http, 300)
    assert abs(seen["503"] - 90) <= 32
    assert seen["a"] == a.total == 300 - seen["503"]


async def test_ring_hash_keeps_a_header_on_one_backend(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """A ring-hash cluster with a header hash policy: every request of one ``x-user`` reaches
    the same backend, and different users reach more than one."""
    route = to("c")
    route.route.hash_policy.add().header.header_name = "x-user"
    cp.set_all(
        resources(
            route_config(vhost("v", ["*"], route)), cluster_of("c", three, lb_policy="ring_hash")
        )
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        chosen = {}
        for user in range(12):
            seen = await answers(http, 5, headers={"x-user": str(user)})
            assert len(seen) == 1, seen
            chosen[user] = next(iter(seen))
    assert len(set(chosen.values())) > 1


async def test_requests_are_reported_to_the_lrs_server_per_locality(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """A cluster with ``lrs_server``: 4 answered requests and 2 answered 500 reach the
    control plane's LRS server as issued 6, succeeded 4, errored 2 for its locality."""
    a, _, _ = three
    cp.load_reporting.configure(send_all_clusters=True, interval=1)
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a], lrs=True)))
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        answering(a, 500, "/fail")
        await answers(http, 4)
        await answers(http, 2, "http://svc/fail")
        await eventually(lambda: _totals(cp.load_reports).get(("c", "", "z-c")) == [6, 4, 2], 8)


async def test_outlier_detection_ejects_a_backend_answering_5xx(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """Failure-percentage outlier detection fed by real responses: a backend answering 500
    to every request is ejected, and requests then reach only the healthy ones."""
    a, b, c = three
    cluster, assignment = cluster_of("c", three)
    detection = cluster.outlier_detection
    detection.interval.FromMilliseconds(100)
    detection.base_ejection_time.FromSeconds(30)
    detection.failure_percentage_threshold.value = 50
    detection.enforcing_failure_percentage.value = 100
    detection.failure_percentage_minimum_hosts.value = 3
    detection.failure_percentage_request_volume.value = 3
    detection.enforcing_success_rate.value = 0
    # Envoy ejects only while (ejected + 1) / hosts stays within max_ejection_percent (default
    # 10: none of three hosts); gRPC always lets one go
    detection.max_ejection_percent.value = 50
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), [cluster, assignment]))
    answering(a, 500)
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:

        async def ejected() -> bool:
            seen = await answers(http, 9)
            return seen["a"] == 0 and seen["500"] == 0

        await eventually(ejected, 10, what="backend a ejected")
        assert b.total > 0
        assert c.total > 0


async def test_a_nack_keeps_the_last_configuration_in_use(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """A route configuration the client NACKs changes nothing: requests keep going where the
    last good one sent them."""
    a, b, _ = three
    cp.set_all(
        resources(
            route_config(vhost("v", ["*"], to("a"))), cluster_of("a", [a]), cluster_of("b", [b])
        )
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        assert await answers(http, 3) == {"a": 3}
        bad = route_config(vhost("v", ["*"], to("b")))
        bad.virtual_hosts[0].routes[0].match.safe_regex.regex = "(unclosed"
        cp.set(bad)
        await eventually(lambda: cp.nacks(), 5, what="a NACK")
        assert await answers(http, 3) == {"a": 3}
    assert b.total == 0


async def test_the_response_body_is_streamed_not_buffered(
    cp: ControlPlane, client: XdsClient
) -> None:
    """A response's first chunk reaches the caller while the backend still holds its second."""
    async with (
        streaming_backend() as a,
        XdsTransport(LISTENER, client=client) as transport,
        http_of(transport) as http,
    ):
        cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a])))
        async with http.stream("GET", "http://svc/stream") as response:
            chunks = response.aiter_raw()
            assert await asyncio.wait_for(anext(chunks), 5) == b"first"
            a.gate.set()
            assert [chunk async for chunk in chunks] == [b"second"]


async def test_the_routes_timeout_answers_504(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """A backend that does not answer within the route's timeout: Envoy's 504 ``upstream
    request timeout``."""
    a, _, _ = three
    holding(a)
    route = to("c")
    route.route.timeout.FromMilliseconds(200)
    cp.set_all(resources(route_config(vhost("v", ["*"], route)), cluster_of("c", [a])))
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        r = await http.get("http://svc/hold")
    assert (r.status_code, r.content) == (504, b"upstream request timeout")


async def test_a_retry_after_a_per_try_timeout_avoids_the_host_tried(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """Ring hash by ``x-user`` with one backend that never answers: a request whose hash
    lands on it times out its try and is retried elsewhere (the ``previous_hosts``
    predicate), so every user's request ends 200; some did land on it first."""
    a, _, _ = three
    holding(a)
    route = to("c")
    route.route.hash_policy.add().header.header_name = "x-user"
    policy = route.route.retry_policy
    policy.retry_on = "5xx"
    policy.num_retries.value = 1
    policy.per_try_timeout.FromMilliseconds(200)
    policy.host_selection_retry_max_attempts = 10
    predicate = policy.retry_host_predicate.add(name="envoy.retry_host_predicates.previous_hosts")
    predicate.typed_config.Pack(previous_hosts_pb2.PreviousHostsPredicate())
    cp.set_all(
        resources(
            route_config(vhost("v", ["*"], route)), cluster_of("c", three, lb_policy="ring_hash")
        )
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        for user in range(20):
            r = await http.get("http://svc/hold", headers={"x-user": str(user)})
            assert r.status_code == 200, (user, r.status_code)
    assert a.counts["/hold"] > 0


async def test_direct_responses_and_redirects_are_answered_locally(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """A route's direct response and redirect are answered by the transport; no backend sees
    them."""
    a, _, _ = three
    direct = route_components_pb2.Route()
    direct.match.prefix = "/direct"
    direct.direct_response.status = 418
    direct.direct_response.body.inline_string = "teapot"
    moved = route_components_pb2.Route()
    moved.match.prefix = "/old"
    moved.redirect.path_redirect = "/new"
    cp.set_all(
        resources(route_config(vhost("v", ["*"], direct, moved, to("c"))), cluster_of("c", [a]))
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        r = await http.get("http://svc/direct")
        assert (r.status_code, r.text) == (418, "teapot")
        r = await http.get("http://svc/old")
        assert (r.status_code, r.headers["location"]) == (301, "http://svc/new")
    assert a.total == 0


async def test_a_request_body_is_sent_again_with_each_retry_unless_it_is_a_stream(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """A body given whole is sent with every attempt; a body given as a stream can be read
    only once, so its request is tried once, as Envoy does once its buffer is gone."""
    a, _, _ = three
    route = retrying("5xx")
    cp.set_all(resources(route_config(vhost("v", ["*"], route)), cluster_of("c", [a])))
    answering(a, 503)

    async def chunks() -> AsyncIterator[bytes]:
        yield b"once"

    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        assert (await http.post("http://svc/p", content=b"whole")).status_code == 503
        assert [r.body for r in a.requests] == [b"whole"] * 3
        assert (await http.post("http://svc/p", content=chunks())).status_code == 503
    assert [r.body for r in a.requests[3:]] == [b"once"]


async def test_a_response_header_the_policy_names_is_retried(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """``retriable-headers``: a 200 carrying ``x-retry`` is retried, and the answer without it
    is the response; the backend saw both attempts."""
    a, _, _ = three
    route = retrying("retriable-headers")
    policy = route.route.retry_policy
    policy.retriable_headers.add(name="x-retry").present_match = True
    cp.set_all(resources(route_config(vhost("v", ["*"], route)), cluster_of("c", [a])))
    a.script("/again", Behaviour(headers=(("x-retry", "1"),)))
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        r = await http.get("http://svc/again")
    assert r.status_code == 200
    assert "x-retry" not in r.headers
    assert a.counts["/again"] == 2


async def test_a_response_header_the_request_names_is_retried_and_the_names_not_forwarded(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """``retriable-headers`` with ``x-envoy-retriable-header-names: x-overloaded`` on the
    request: a 200 carrying ``x-overloaded`` is retried (the backend saw two attempts), the
    answer is the one without it, and the backend never saw the request header."""
    a, _, _ = three
    route = retrying("retriable-headers")
    cp.set_all(resources(route_config(vhost("v", ["*"], route)), cluster_of("c", [a])))
    a.script("/busy", Behaviour(headers=(("x-overloaded", "1"),)))
    names = {"x-envoy-retriable-header-names": "x-other, X-Overloaded"}
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        r = await http.get("http://svc/busy", headers=names)
    assert r.status_code == 200
    assert "x-overloaded" not in r.headers
    assert a.counts["/busy"] == 2
    assert [seen.header("x-envoy-retriable-header-names") for seen in a.requests] == [None] * 2


async def test_a_retrys_back_off_waits_on_the_transports_clock(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """``retry_on: 5xx`` with a 20 s back-off on the transport's fake clock: after the first
    503 the retry is not sent while the clock stands, and is sent as soon as the clock passes
    the back-off (a draw under 20 s), with no wait on real time."""
    a, _, _ = three
    clock = FakeClock()
    route = to("c")
    policy = route.route.retry_policy
    policy.retry_on = "5xx"
    policy.retry_back_off.base_interval.FromSeconds(20)
    route.route.timeout.FromSeconds(60)  # past the back-off (Envoy's default is 15 s)
    cp.set_all(resources(route_config(vhost("v", ["*"], route)), cluster_of("c", [a])))
    a.script("*", Behaviour(status=503), then=Behaviour(status=200))
    transport = XdsTransport(LISTENER, client=client, rng=random.Random(3), _clock=clock)
    async with transport, http_of(transport) as http:
        request = asyncio.ensure_future(http.get("http://svc/"))
        await eventually(lambda: a.total == 1, what="the first attempt")
        for _ in range(50):
            await asyncio.sleep(0)
        assert not request.done()
        assert a.total == 1
        clock.advance(20)
        answered = await asyncio.wait_for(request, 2)
    assert answered.status_code == 200
    assert a.total == 2


async def test_a_fault_delay_holds_the_request_before_it_is_sent(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """The fault filter delaying every request by 0.3 s: the request takes at least that long
    and then reaches the backend."""
    a, _, _ = three
    delay = fault(delay_s=0.3, delay_percent=(100, 0))
    cp.set_all(
        resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a]), faults=[delay])
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        await answers(http, 1)  # the configuration is in place
        started = time.monotonic()
        r = await http.get("http://svc/late")
        took = time.monotonic() - started
    assert r.headers["x-backend"] == "a"
    assert took >= 0.3


async def test_a_cluster_header_route_resolves_its_cluster_at_request_time(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """A ``cluster_header`` route: the cluster a request names is resolved on demand (no route
    reaches it ahead) and the request reaches its backend; a cluster the server does not have
    answers 503 naming it."""
    a, b, _ = three
    route = route_components_pb2.Route()
    route.match.prefix = "/"
    route.route.cluster_header = "x-cluster"
    cp.set_all(
        resources(
            route_config(vhost("v", ["*"], route)), cluster_of("a", [a]), cluster_of("b", [b])
        )
    )
    async with XdsTransport(LISTENER, client=client) as transport, http_of(transport) as http:
        r = await http.get("http://svc/by-header", headers={"x-cluster": "b"})
        assert r.headers["x-backend"] == "b"
        r = await http.get("http://svc/by-header", headers={"x-cluster": "ghost"})
    assert r.status_code == 503
    assert "CDS resource ghost: does not exist" in r.headers[ERROR_HEADER]
    assert a.total == 0
