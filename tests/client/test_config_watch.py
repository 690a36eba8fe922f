"""watch_config end to end: complete snapshots, and exactly the subscriptions they need."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from envoy.config.route.v3 import route_pb2

from tests import builders
from tests.builders import cluster, endpoints, listener
from tests.client.conftest import Variant
from tests.helpers import eventually, idle
from tests.shell.conftest import OPTIONS as FAKE_OPTIONS
from xdsclient import (
    AmbientError,
    ConfigUpdate,
    ResourceDoesNotExistError,
    XdsClient,
    XdsConfig,
)
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER
from xdsclient.testing import ControlPlane, FakeClock, FakeTransport
from xdsclient.testing.builders import aggregate_cluster


def routes(*clusters: str) -> Any:
    message = route_pb2.RouteConfiguration(name="routes")
    vhost = message.virtual_hosts.add(name="vh", domains=["*"])
    for i, name in enumerate(clusters):
        route = vhost.routes.add()
        route.match.prefix = f"/{i}/"
        route.route.cluster = name
    return message


def serve(cp: ControlPlane, *clusters: str) -> None:
    cp.set(listener("l"))
    cp.set(routes(*clusters))
    for name in clusters:
        cp.set(cluster(name))
        cp.set(endpoints(name))


async def next_config(watch: Any, timeout: float = 5.0) -> ConfigUpdate:
    async with asyncio.timeout(timeout):
        update: ConfigUpdate = await anext(watch)
        return update


def interest(cp: ControlPlane, type_url: str, delta: bool) -> list[list[str]]:
    """The subscription changes the client asked for, one entry per request that changed them."""
    changes: list[list[str]] = []
    for request in cp.requests:
        if request.type_url != type_url:
            continue
        message = request.message
        if delta:
            change = [f"+{n}" for n in message.resource_names_subscribe]
            change += [f"-{n}" for n in message.resource_names_unsubscribe]
        else:
            change = sorted(message.resource_names)
            if changes and changes[-1] == change:
                continue  # an ACK restating the same names
        if change or not delta:
            changes.append(change)
    return changes


async def test_a_complete_snapshot_after_one_subscription_per_type(
    control_plane: ControlPlane, client: XdsClient, variant: Variant
) -> None:
    serve(control_plane, "a", "b")
    async with client.watch_config("l") as watch:
        config = await next_config(watch)
        assert isinstance(config, XdsConfig)
        assert config.listener.name == "l"
        assert config.route_config.name == "routes"
        assert sorted(config.clusters) == ["a", "b"]
        assert all(c.endpoints is not None for c in config.clusters.values())
        delta = variant["delta"]
        if delta:
            assert interest(control_plane, CLUSTER.type_url, delta) == [["+a", "+b"]]
            assert interest(control_plane, ENDPOINT.type_url, delta) == [["+a", "+b"]]
        else:
            assert interest(control_plane, CLUSTER.type_url, delta) == [["a", "b"]]
            assert interest(control_plane, ENDPOINT.type_url, delta) == [["a", "b"]]


async def test_references_that_change_subscribe_and_unsubscribe_in_one_request(
    control_plane: ControlPlane, client: XdsClient, variant: Variant
) -> None:
    serve(control_plane, "a", "b")
    control_plane.set(cluster("c"))
    control_plane.set(endpoints("c"))
    async with client.watch_config("l") as watch:
        assert isinstance(await next_config(watch), XdsConfig)
        control_plane.set(routes("b", "c"))
        config = await next_config(watch)
        assert isinstance(config, XdsConfig)
        assert sorted(config.clusters) == ["b", "c"]
        delta = variant["delta"]
        # The new routes drop a and add c in one CDS request; a's endpoints go with the same
        # response, c's can only be asked for once cluster c has arrived.
        clusters = [["+a", "+b"], ["+c", "-a"]] if delta else [["a", "b"], ["b", "c"]]
        assignments = [["+a", "+b"], ["-a"], ["+c"]] if delta else [["a", "b"], ["b"], ["b", "c"]]
        await eventually(lambda: interest(control_plane, ENDPOINT.type_url, delta) == assignments)
        assert interest(control_plane, CLUSTER.type_url, delta) == clusters
        assert client.resource_state(CLUSTER, "a") is None


async def test_endpoint_changes_publish_a_new_snapshot(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    serve(control_plane, "a")
    async with client.watch_config("l") as watch:
        first = await next_config(watch)
        control_plane.set(endpoints("a", port=9999))
        second = await next_config(watch)
        assert isinstance(first, XdsConfig)
        assert isinstance(second, XdsConfig)
        a = second.clusters["a"].endpoints
        assert a is not None
        assert a.localities[0].endpoints[0].port == 9999
        assert first != second


async def test_a_missing_cluster_is_reported_without_withholding_the_others(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    serve(control_plane, "a")
    control_plane.set(routes("a", "ghost"))
    async with client.watch_config("l") as watch:
        config = await next_config(watch)  # after ghost's does-not-exist timer (1 s here)
        assert isinstance(config, XdsConfig)
        assert config.clusters["a"].ok
        assert isinstance(config.clusters["ghost"].error, ResourceDoesNotExistError)


async def test_a_deleted_listener_replaces_the_snapshot_with_an_error(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    serve(control_plane, "a")
    async with client.watch_config("l") as watch:
        assert isinstance(await next_config(watch), XdsConfig)
        control_plane.remove(LISTENER.type_url, "l")
        error = await next_config(watch)
        assert isinstance(error, ResourceDoesNotExistError)


async def test_the_callback_form_and_cancel(control_plane: ControlPlane, client: XdsClient) -> None:
    serve(control_plane, "a")
    seen: list[ConfigUpdate] = []
    watch = client.add_config_watcher("l", seen.append)
    await eventually(lambda: seen)
    assert isinstance(seen[0], XdsConfig)
    watch.cancel()
    await eventually(lambda: client.resource_state(LISTENER, "l") is None)


async def test_an_async_callback_is_awaited_and_one_that_raises_is_contained(
    control_plane: ControlPlane, client: XdsClient, caplog: pytest.LogCaptureFixture
) -> None:
    serve(control_plane, "a")
    seen: list[ConfigUpdate] = []

    async def record(update: ConfigUpdate) -> None:
        await asyncio.sleep(0)
        seen.append(update)

    def explode(update: ConfigUpdate) -> None:
        raise RuntimeError("config watcher bug")

    broken = client.add_config_watcher("l", explode)
    working = client.add_config_watcher("l", record)
    await eventually(lambda: seen)
    assert isinstance(seen[0], XdsConfig)
    assert "config watcher" in caplog.text
    broken.cancel()
    working.cancel()


async def test_an_unreachable_server_gives_an_error_snapshot_and_a_resource_error(
    variant: Variant,
) -> None:
    from tests.reliability.test_fault_matrix import free_port
    from xdsclient import TransportError

    async with (
        XdsClient(f"127.0.0.1:{free_port()}", node_id="n", **variant) as client,
        client.watch_config("l") as watch,
    ):
        update = await next_config(watch)
        assert isinstance(update, TransportError)
        state = client.resource_state(LISTENER, "l")
        assert state is not None
        assert isinstance(state.error, TransportError)


async def _served(fake: FakeTransport, configs: Any) -> XdsConfig:
    """Serve the listener's whole configuration on the fake stream; its first snapshot."""
    stream = await fake.stream()
    for resource in (listener("l", route="r"), builders.routes("c", name="r"), cluster("c")):
        stream.send([resource])
        await idle()
    stream.send([endpoints("c")])
    snapshot = await next_config(configs)
    assert isinstance(snapshot, XdsConfig)
    return snapshot


async def test_a_server_that_stays_down_is_one_ambient_error_not_one_per_retry() -> None:
    """While the server stays unreachable the same way, the watch says so once, not at every
    backoff cycle; a different failure is news again."""
    fake, clock = FakeTransport(), FakeClock()
    async with (
        XdsClient("fake:1", node_id="n", transport=fake, clock=clock, options=FAKE_OPTIONS) as c,
        c.watch_config("l") as configs,
    ):
        await _served(fake, configs)
        fake.refuse("xDS server gone")
        fake.current.fail()
        warning = await next_config(configs)
        assert isinstance(warning, AmbientError)
        attempts = fake.open_attempts
        reader = asyncio.ensure_future(next_config(configs))
        for _ in range(4):  # four more backoff cycles, each failing the same way
            clock.advance(200)
            await idle()
        assert fake.open_attempts >= attempts + 4  # the client did retry
        assert not reader.done()
        fake.refuse("xDS server gone elsewhere")
        clock.advance(200)
        news = await reader
        assert isinstance(news, AmbientError)
        assert "elsewhere" in str(news.error)


async def test_the_same_failure_after_a_new_snapshot_is_reported_again() -> None:
    """An ambient error is about the snapshot before it: after a new snapshot the same failure
    is reported again."""
    fake, clock = FakeTransport(), FakeClock()
    async with (
        XdsClient("fake:1", node_id="n", transport=fake, clock=clock, options=FAKE_OPTIONS) as c,
        c.watch_config("l") as configs,
    ):
        await _served(fake, configs)
        fake.refuse("xDS server gone")
        fake.current.fail()
        assert isinstance(await next_config(configs), AmbientError)
        fake.accept()
        clock.advance(200)
        stream = await fake.stream()
        stream.send([endpoints("c", port=9090)])
        assert isinstance(await next_config(configs), XdsConfig)
        fake.refuse("xDS server gone")
        stream.fail()
        again = await next_config(configs)
        assert isinstance(again, AmbientError)
        assert "xDS server gone" in str(again.error)


async def test_an_aggregate_child_with_an_empty_name_is_that_clusters_error(
    control_plane: ControlPlane, client: XdsClient, variant: Variant
) -> None:
    """An aggregate cluster naming an empty child still gives a snapshot: the child is an
    unusable cluster, the other leaves are used, and no request names the empty child."""
    control_plane.set(listener("l"))
    control_plane.set(routes("agg"))
    control_plane.set(aggregate_cluster("agg", ["", "a"]))
    control_plane.set(cluster("a"))
    control_plane.set(endpoints("a"))
    async with client.watch_config("l") as watch:
        config = await next_config(watch)
    assert isinstance(config, XdsConfig)
    assert config.clusters["agg"].leaves == ("a",)
    assert isinstance(config.clusters[""].error, ResourceDoesNotExistError)
    asked = [
        list(r.message.resource_names_subscribe if variant["delta"] else r.message.resource_names)
        for r in control_plane.requests
        if r.type_url == CLUSTER.type_url
    ]
    assert ["agg"] in asked
    assert not any("" in names for names in asked)
