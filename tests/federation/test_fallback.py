"""Fallback between an authority's servers (gRFC A71), on the in-memory transport with a fake
clock: when the client moves on, what it keeps, when it goes back, what watchers see."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.builders import cluster, endpoints
from tests.client.conftest import Variant
from tests.helpers import idle
from tests.shell.conftest import OPTIONS
from tests.shell.test_metrics import _points
from xdsclient import (
    CallbackWatcher,
    DataError,
    Event,
    ResourceChanged,
    ResourceStatus,
    XdsClient,
    load_bootstrap,
)
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import FakeClock, FakeStream, FakeTransport, bootstrap

PRIMARY, SECONDARY, THIRD = "primary:1", "secondary:1", "third:1"


def _client(
    fake: FakeTransport, clock: FakeClock, variant: Variant, *servers: str, **kw: Any
) -> XdsClient:
    config = load_bootstrap(bootstrap(list(servers), **kw))
    return XdsClient(bootstrap=config, transport=fake, clock=clock, options=OPTIONS, **variant)


@pytest.fixture
async def client(
    fake: FakeTransport, clock: FakeClock, variant: Variant
) -> AsyncIterator[XdsClient]:
    async with _client(fake, clock, variant, PRIMARY, SECONDARY) as c:
        yield c


def _watch(client: XdsClient, name: str = "a") -> list[Event]:
    seen: list[Event] = []
    client.add_watcher(ENDPOINT, name, CallbackWatcher(seen.append))
    return seen


async def _answer(stream: FakeStream, *names: str, port: int = 1) -> None:
    """Read the client's request and answer with endpoints for ``names``."""
    await stream.request()
    stream.send([endpoints(n, port=port) for n in names], version=str(port))
    await idle()


async def _fallen_back(
    fake: FakeTransport, client: XdsClient, port: int
) -> tuple[list[Event], FakeStream]:
    """The primary refused from the start: a watcher of ``a`` is served by the fallback
    (``port``); what it saw, and the fallback's stream."""
    fake.refuse(server=PRIMARY)
    seen = _watch(client)
    fallback = await fake.stream(SECONDARY)
    await _answer(fallback, "a", port=port)
    return seen, fallback


async def _primary_back(fake: FakeTransport, clock: FakeClock) -> FakeStream:
    """The primary accepts again and its first backoff passes: its new stream (the request
    not yet read)."""
    fake.accept(server=PRIMARY)
    clock.advance(1.0)
    return await fake.stream(PRIMARY)


def _ports(seen: list[Event]) -> list[int | str]:
    """What a watcher saw: a port per change, the kind of error otherwise."""
    return [
        e.value.localities[0].endpoints[0].port
        if isinstance(e, ResourceChanged)
        else type(e).__name__
        for e in seen
    ]


async def test_a_primary_down_at_start_falls_back_then_goes_back_once_it_answers(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen, _ = await _fallen_back(fake, client, port=2)
    assert _ports(seen) == [2]  # no connectivity error: a server was left to try
    await _answer(await _primary_back(fake, clock), "a", port=1)
    assert _ports(seen) == [2, 1]
    assert SECONDARY in fake.closed_servers  # nobody needs the fallback any more
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.version == "1"


async def test_a_primary_lost_with_everything_cached_does_not_fall_back(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen = _watch(client)
    primary = await fake.stream(PRIMARY)
    await _answer(primary, "a", port=1)
    fake.refuse(server=PRIMARY)
    primary.fail()
    await idle()  # the stream had answered: reconnect at once, refused
    assert _ports(seen) == [1, "AmbientError"]
    assert all(s.server == PRIMARY for s in fake.streams)
    assert fake.closed_servers == []


async def test_a_new_watch_while_the_primary_is_down_falls_back_for_it(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    first = _watch(client, "a")
    primary = await fake.stream(PRIMARY)
    await _answer(primary, "a", port=1)
    fake.refuse(server=PRIMARY)
    primary.fail()
    await idle()
    second = _watch(client, "b")
    fallback = await fake.stream(SECONDARY)
    request = await fallback.request()
    names = request.resource_names_subscribe if fallback.spec.delta else request.resource_names
    assert sorted(names) == ["a", "b"]  # everything the authority watches
    fallback.send([endpoints("a", port=2), endpoints("b", port=2)], version="2")
    await idle()
    assert _ports(first) == [1, "AmbientError", 2]
    assert _ports(second) == [2]


async def test_all_servers_down_gives_data_errors_only_from_the_last_one(
    fake: FakeTransport, clock: FakeClock, variant: Variant
) -> None:
    for server in (PRIMARY, SECONDARY, THIRD):
        fake.refuse(f"{server} refused", server=server)
    async with _client(fake, clock, variant, PRIMARY, SECONDARY, THIRD) as client:
        seen = _watch(client)
        await idle()
        assert _ports(seen) == ["DataError"]  # once, when the third server failed too
        error = seen[0].error  # type: ignore[union-attr]
        assert str(error) == f"{THIRD} refused"
        fake.accept(server=SECONDARY)
        clock.advance(1.0)
        await _answer(await fake.stream(SECONDARY), "a", port=2)
        *errors, value = _ports(seen)  # the third server may have failed again meanwhile
        assert set(errors) == {"DataError"}
        assert value == 2
        assert THIRD in fake.closed_servers


async def test_all_servers_down_with_a_cached_value_keeps_it(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen, fallback = await _fallen_back(fake, client, port=2)
    fake.refuse(server=SECONDARY)
    fallback.fail()
    await idle()
    assert _ports(seen) == [2, "AmbientError"]
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.value is not None


async def test_a_flapping_primary_moves_the_authority_each_time_something_is_missing(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen, _ = await _fallen_back(fake, client, port=2)
    primary = await _primary_back(fake, clock)
    await _answer(primary, "a", port=1)  # back on the primary; the fallback closes
    assert fake.closed_servers == [SECONDARY]
    fake.refuse(server=PRIMARY)
    primary.fail()
    await idle()
    other = _watch(client, "b")  # missing while the primary is down: fall back again
    await _answer(await fake.stream(SECONDARY), "a", "b", port=3)
    assert _ports(seen) == [2, 1, "AmbientError", 3]
    assert _ports(other) == [3]


async def test_a_fallback_server_s_events_stop_once_the_primary_is_back(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen, fallback = await _fallen_back(fake, client, port=2)
    await _answer(await _primary_back(fake, clock), "a", port=1)
    fallback.send([endpoints("a", port=9)], version="9")  # too late: it is being closed
    await idle()
    assert _ports(seen) == [2, 1]


async def test_a_timer_on_a_primary_that_connects_but_stays_silent_is_not_heard(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen, _ = await _fallen_back(fake, client, port=2)
    primary = await _primary_back(fake, clock)
    await primary.request()
    clock.advance(OPTIONS.does_not_exist_timeout + 1)  # the primary's does-not-exist timer
    await idle()
    assert _ports(seen) == [2]
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.version == "2"


async def test_one_server_shared_by_two_authorities_has_one_channel(
    fake: FakeTransport, clock: FakeClock, variant: Variant
) -> None:
    kw: Any = {"authorities": {"a.example": [], "b.example": [PRIMARY]}}
    async with _client(fake, clock, variant, PRIMARY, **kw) as client:
        name_a = "xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/x"
        name_b = "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/y"
        seen_a, seen_b = _watch(client, name_a), _watch(client, name_b)
        stream = await fake.stream(PRIMARY)
        await idle()
        requested = {
            n
            for r in [*stream.requests]
            for n in (r.resource_names_subscribe if stream.spec.delta else r.resource_names)
        }
        assert requested == {name_a, name_b}
        stream.send([endpoints(name_a), endpoints(name_b)])
        await idle()
        assert [type(e) for e in seen_a + seen_b] == [ResourceChanged, ResourceChanged]
        assert [s.server for s in fake.streams] == [PRIMARY]


async def test_an_authority_on_its_own_server_falls_back_alone(
    fake: FakeTransport, clock: FakeClock, variant: Variant
) -> None:
    kw: Any = {"authorities": {"b.example": [SECONDARY, THIRD]}}
    async with _client(fake, clock, variant, PRIMARY, **kw) as client:
        name_b = "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/y"
        fake.refuse(server=SECONDARY)
        seen_old, seen_b = _watch(client, "a"), _watch(client, name_b)
        await _answer(await fake.stream(PRIMARY), "a", port=1)
        await _answer(await fake.stream(THIRD), name_b, port=3)
        assert _ports(seen_old) == [1]
        assert _ports(seen_b) == [3]


async def test_a_does_not_exist_answer_counts_as_cached(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen = _watch(client)
    primary = await fake.stream(PRIMARY)
    await primary.request()
    clock.advance(OPTIONS.does_not_exist_timeout + 1)
    await idle()
    fake.refuse(server=PRIMARY)
    primary.fail()
    await idle()
    assert [type(e) for e in seen] == [DataError, DataError]  # timed out, then unreachable
    assert all(s.server == PRIMARY for s in fake.streams)


async def test_a_type_first_watched_after_a_fallback_is_read_from_the_fallback_server(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, variant: Variant
) -> None:
    fake.refuse(server=PRIMARY)
    _watch(client)
    fallback = await fake.stream(SECONDARY)
    await _answer(fallback, "a", port=2)
    client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
    await idle()
    stream = fallback if variant["ads"] else await fake.stream(SECONDARY)
    stream.send([cluster("c")], version="5")
    await idle()
    state = client.resource_state(CLUSTER, "c")
    assert state is not None
    assert state.status is ResourceStatus.ACKED
    assert state.version == "5"


async def test_server_features_apply_to_their_own_server_alone(
    fake: FakeTransport, clock: FakeClock, variant: Variant
) -> None:
    keeper = {
        "server_uri": SECONDARY,
        "channel_creds": [{"type": "insecure"}],
        "server_features": ["ignore_resource_deletion"],
    }
    config = bootstrap([PRIMARY], authorities={"b.example": []})
    config["authorities"]["b.example"] = {"xds_servers": [keeper]}
    kept = "xdstp://b.example/envoy.config.cluster.v3.Cluster/kept"
    async with XdsClient(
        bootstrap=config, transport=fake, clock=clock, options=OPTIONS, **variant
    ) as client:
        for name in ("gone", kept):
            client.add_watcher(CLUSTER, name, CallbackWatcher(lambda event: None))
        for server, name in ((PRIMARY, "gone"), (SECONDARY, kept)):
            stream = await fake.stream(server)
            message = cluster(name)
            message.eds_cluster_config.service_name = "e"  # required of xdstp names (gRFC A47)
            stream.send([message])
            await idle()
            removed = [name] if stream.spec.delta else []
            stream.send([], type_url=CLUSTER.type_url, version="2", removed=removed)
            await idle()
        gone, still = client.resource_state(CLUSTER, "gone"), client.resource_state(CLUSTER, kept)
        assert gone is not None
        assert gone.status is ResourceStatus.DOES_NOT_EXIST
        assert still is not None
        assert still.status is ResourceStatus.DOES_NOT_EXIST_BUT_CACHED


async def test_a_fallback_shows_as_a_failure_of_the_primary_and_updates_of_the_secondary(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    reader = InMemoryMetricReader()
    client.enable_metrics(MeterProvider(metric_readers=[reader]), target="t")
    fake.refuse(server=PRIMARY)
    _watch(client)
    await _answer(await fake.stream(SECONDARY), "a", port=2)
    points = _points(reader)
    connected = {a["grpc.xds.server"]: v for v, a in points["grpc.xds_client.connected"]}
    assert connected == {PRIMARY: 0, SECONDARY: 1}
    failures = {a["grpc.xds.server"]: v for v, a in points["grpc.xds_client.server_failure"]}
    assert failures == {PRIMARY: 1}
    valid = {a["grpc.xds.server"]: v for v, a in points["grpc.xds_client.resource_updates_valid"]}
    assert valid == {SECONDARY: 1}
    await _answer(await _primary_back(fake, clock), "a", port=1)
    await idle()
    points = _points(reader)
    connected = {a["grpc.xds.server"]: v for v, a in points["grpc.xds_client.connected"]}
    assert connected[PRIMARY] == 1
    valid = {a["grpc.xds.server"]: v for v, a in points["grpc.xds_client.resource_updates_valid"]}
    assert valid == {PRIMARY: 1, SECONDARY: 1}
    stats = client.stats()
    assert stats.servers[PRIMARY].failures == 1
    assert stats.type_stats(ENDPOINT.type_url, SECONDARY).update_success == 1
    assert stats.type_stats(ENDPOINT.type_url).update_success == 2


async def test_a_fallback_server_closed_after_going_back_is_no_longer_connected(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """Once the client is back on the primary and has closed the fallback's channel, the
    fallback shows as not connected, in `stats()` and in A78's gauge, without a failure."""
    reader = InMemoryMetricReader()
    client.enable_metrics(MeterProvider(metric_readers=[reader]), target="t")
    fake.refuse(server=PRIMARY)
    _watch(client)
    await _answer(await fake.stream(SECONDARY), "a", port=2)
    assert client.stats().servers[SECONDARY].connected_state == 1
    await _answer(await _primary_back(fake, clock), "a", port=1)
    await idle()
    assert SECONDARY in fake.closed_servers
    stats = client.stats()
    assert {s: stats.servers[s].connected_state for s in (PRIMARY, SECONDARY)} == {
        PRIMARY: 1,
        SECONDARY: 0,
    }
    assert stats.servers[SECONDARY].failures == 0
    points = _points(reader)
    connected = {a["grpc.xds.server"]: v for v, a in points["grpc.xds_client.connected"]}
    assert connected == {PRIMARY: 1, SECONDARY: 0}
    failures = {a["grpc.xds.server"]: v for v, a in points["grpc.xds_client.server_failure"]}
    assert failures == {PRIMARY: 1}


async def test_when_both_servers_send_the_same_versions_a_watcher_sees_each_once(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """Both servers send versions 12 and 13 while the primary takes the authority back: the
    watcher sees each version once, from the primary; the fallback's copies are not delivered."""
    seen, fallback = await _fallen_back(fake, client, port=11)
    primary = await _primary_back(fake, clock)
    await primary.request()
    for port in (12, 13):
        primary.send([endpoints("a", port=port)], version=str(port))
        fallback.send([endpoints("a", port=port)], version=str(port))
    await idle()
    assert _ports(seen) == [11, 12, 13]


async def test_a_primary_answering_with_an_older_state_than_the_fallback_s_is_followed(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """gRFC A71: the primary's first response after an outage makes it the authority's server,
    and its contents apply even when older than what the fallback delivered meanwhile (gRPC
    C-core does the same; the client cannot order two servers' versions). The watcher goes
    back only because a server sent the older version, and never replays one by itself."""
    seen, fallback = await _fallen_back(fake, client, port=11)
    primary = await _primary_back(fake, clock)
    await primary.request()
    for port in (12, 13):
        fallback.send([endpoints("a", port=port)], version=str(port))
        await idle()
    primary.send([endpoints("a", port=12)], version="12")  # sent before it had 13
    await idle()
    assert _ports(seen) == [11, 12, 13, 12]
    primary.send([endpoints("a", port=13)], version="13")
    fallback.send([endpoints("a", port=14)], version="14")  # closing: not heard
    await idle()
    assert _ports(seen) == [11, 12, 13, 12, 13]


async def test_the_fallback_server_s_state_of_the_world_applies_to_cached_resources(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, variant: Variant
) -> None:
    """A cached cluster that the fallback server's SotW CDS response leaves out is deleted,
    as any full state deletes what it omits (gRPC C-core does the same: the fallback is the
    authority's server now); over Delta only an explicit removal deletes, so it stays."""
    seen_a: list[Event] = []
    client.add_watcher(CLUSTER, "a", CallbackWatcher(seen_a.append))
    primary = await fake.stream(PRIMARY)
    await primary.request()
    primary.send([cluster("a")], version="1")
    await idle()
    fake.refuse(server=PRIMARY)
    primary.fail()
    await idle()
    client.add_watcher(CLUSTER, "b", CallbackWatcher(lambda event: None))  # missing: fall back
    fallback = await fake.stream(SECONDARY)
    await fallback.request()
    fallback.send([cluster("b")], version="7")
    await idle()
    state_a, state_b = client.resource_state(CLUSTER, "a"), client.resource_state(CLUSTER, "b")
    assert state_b is not None
    assert state_b.status is ResourceStatus.ACKED
    assert state_a is not None
    if variant["delta"]:
        assert state_a.status is ResourceStatus.ACKED
        assert [type(e).__name__ for e in seen_a] == ["ResourceChanged", "AmbientError"]
    else:
        assert state_a.status is ResourceStatus.DOES_NOT_EXIST
        assert [type(e).__name__ for e in seen_a] == [
            "ResourceChanged",
            "AmbientError",
            "DataError",
        ]
