"""Faults against every transport variant: the client keeps the last good config, reports the
fault as documented, and converges to the server's state once the fault ends."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from tests.builders import cluster, endpoints
from tests.client.conftest import FAST_BACKOFF, Variant, next_event
from tests.helpers import eventually
from tests.reliability.proxy import Proxy
from xdsclient import (
    AmbientError,
    CallbackWatcher,
    ClientOptions,
    DataError,
    ResourceChanged,
    ResourceTimeoutError,
    TransportError,
    XdsClient,
)
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane, bootstrap


def holds(client: XdsClient, message: Any, rtype: Any = ENDPOINT) -> bool:
    """The client's cache holds exactly ``message``."""
    name = message.cluster_name if rtype is ENDPOINT else message.name
    state = client.resource_state(rtype, name)
    return state is not None and state.status.holds_value and state.value.proto == message


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_server_down_at_start_then_up(variant: Variant) -> None:
    cp = ControlPlane()
    await cp.start()
    await cp.stop(keep_port=True)  # down, and its port no other socket's until it is up
    try:
        async with XdsClient(
            cp.address, node_id="n", options=ClientOptions(backoff=FAST_BACKOFF), **variant
        ) as client:
            watch = client.watch(ENDPOINT, "a")
            event = await next_event(watch)
            assert isinstance(event, DataError)
            assert isinstance(event.error, TransportError)
            await cp.start()
            cp.set(endpoints("a"))
            await eventually(lambda: holds(client, endpoints("a")))
    finally:
        await cp.stop()


async def test_a_flapping_server_still_converges(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(endpoints("a"))
    watch = client.watch(ENDPOINT, "a")
    assert isinstance(await next_event(watch), ResourceChanged)
    for port in range(1, 6):
        await control_plane.restart()
        control_plane.set(endpoints("a", port=port))
        await asyncio.sleep(0.2)
    await eventually(lambda: holds(client, endpoints("a", port=5)))
    watch.cancel()


async def test_a_connection_that_never_answers_times_out_new_resources_and_recovers(
    control_plane: ControlPlane, variant: Variant
) -> None:
    control_plane.set(endpoints("cached"))
    control_plane.set(endpoints("new"))
    async with (
        Proxy(control_plane.address) as proxy,
        XdsClient(
            proxy.address,
            node_id="n",
            options=ClientOptions(does_not_exist_timeout=0.5, backoff=FAST_BACKOFF),
            **variant,
        ) as client,
    ):
        cached = client.watch(ENDPOINT, "cached")
        assert isinstance(await next_event(cached), ResourceChanged)
        proxy.stall()
        fresh = client.watch(ENDPOINT, "new")
        timeout = await next_event(fresh)
        assert isinstance(timeout, DataError)
        assert isinstance(timeout.error, ResourceTimeoutError)
        assert holds(client, endpoints("cached"))  # the last good value is still there
        proxy.resume()
        assert isinstance(await next_event(fresh), ResourceChanged)


async def test_keepalive_notices_a_silent_connection_and_the_client_recovers(
    control_plane: ControlPlane, variant: Variant
) -> None:
    control_plane.set(endpoints("a"))
    async with (
        Proxy(control_plane.address) as proxy,
        XdsClient(
            proxy.address,
            node_id="n",
            options=ClientOptions(keepalive_time=1.0, keepalive_timeout=1.0, backoff=FAST_BACKOFF),
            **variant,
        ) as client,
    ):
        watch = client.watch(ENDPOINT, "a")
        assert isinstance(await next_event(watch), ResourceChanged)
        proxy.stall()
        noticed = await next_event(watch, timeout=15)
        assert isinstance(noticed, AmbientError)  # the cached value stays usable
        assert isinstance(noticed.error, TransportError)
        assert holds(client, endpoints("a"))
        proxy.resume()
        control_plane.set(endpoints("a", port=5))
        await eventually(lambda: holds(client, endpoints("a", port=5)), timeout=15)


async def test_reset_and_cut_connections_keep_the_cache_and_reconnect(
    control_plane: ControlPlane, variant: Variant
) -> None:
    control_plane.set(endpoints("a"))
    async with (
        Proxy(control_plane.address) as proxy,
        XdsClient(
            proxy.address, node_id="n", options=ClientOptions(backoff=FAST_BACKOFF), **variant
        ) as client,
    ):
        watch = client.watch(ENDPOINT, "a")  # kept: dropping a watch unsubscribes
        await next_event(watch)
        last = endpoints("a")
        for fault, port in ((proxy.reset, 2), (proxy.cut, 3)):
            fault()
            assert holds(client, last)
            last = endpoints("a", port=port)
            control_plane.set(last)
            await eventually(lambda p=port: holds(client, endpoints("a", port=p)))


async def test_a_huge_but_legal_response_is_taken_whole(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    for i in range(20_000):
        control_plane.set(cluster(f"cluster-{i:05d}-" + "x" * 200))
    watch = client.watch(CLUSTER, "*")
    names: set[str] = set()
    async with asyncio.timeout(30):
        while len(names) < 20_000:
            event = await anext(watch)
            assert isinstance(event, ResourceChanged)
            names.add(event.name)
    watch.cancel()
    assert control_plane.nacks() == []


async def test_a_nonce_never_seen_and_a_stale_repeat_are_answered_harmlessly(
    control_plane: ControlPlane, client: XdsClient, variant: Variant
) -> None:
    from envoy.service.discovery.v3 import discovery_pb2
    from google.protobuf import any_pb2

    control_plane.set(endpoints("a"))
    watch = client.watch(ENDPOINT, "a")
    assert isinstance(await next_event(watch), ResourceChanged)
    packed = any_pb2.Any()
    packed.Pack(endpoints("a"))
    if variant["delta"]:
        raw = discovery_pb2.DeltaDiscoveryResponse(type_url=ENDPOINT.type_url, nonce="never-seen")
        raw.resources.add(name="a", version="x", resource=packed)
    else:
        raw = discovery_pb2.DiscoveryResponse(
            type_url=ENDPOINT.type_url, nonce="never-seen", version_info="x"
        )
        raw.resources.append(packed)
    for _ in range(2):  # the second is a stale repeat of the first
        control_plane.send_raw(raw)
    await control_plane.wait_for_request(lambda r: r.message.response_nonce == "never-seen")
    control_plane.set(endpoints("a", port=7))
    event = await next_event(watch)
    assert isinstance(event, ResourceChanged)  # nothing spurious came from the raw responses
    assert event.value.proto == endpoints("a", port=7)
    watch.cancel()


async def test_a_delta_server_that_ignores_initial_versions_causes_no_spurious_updates(
    control_plane: ControlPlane,
) -> None:
    control_plane.set(endpoints("a"))
    async with XdsClient(
        control_plane.address, node_id="n", delta=True, options=ClientOptions(backoff=FAST_BACKOFF)
    ) as client:
        watch = client.watch(ENDPOINT, "a")
        assert isinstance(await next_event(watch), ResourceChanged)
        control_plane.ignore_initial_resource_versions = True
        mark = len(control_plane.responses)
        control_plane.close_streams()
        await eventually(lambda: any(r.names == ("a",) for r in control_plane.responses[mark:]))
        control_plane.set(endpoints("a", port=9))
        event = await next_event(watch)
        assert isinstance(event, ResourceChanged)  # not the resent, unchanged copy
        assert event.value.proto == endpoints("a", port=9)


async def test_a_connection_held_longer_than_the_timer_still_delivers_the_resource_first(
    control_plane: ControlPlane, variant: Variant
) -> None:
    # gRFC A57: the does-not-exist timer starts once the request is written on an established
    # stream, not while the connection is still coming up.
    control_plane.set(endpoints("a"))
    async with Proxy(control_plane.address) as proxy:
        proxy.stall()
        asyncio.get_running_loop().call_later(1.5, proxy.resume)
        async with (
            XdsClient(
                proxy.address,
                node_id="n",
                options=ClientOptions(does_not_exist_timeout=1.0, backoff=FAST_BACKOFF),
                **variant,
            ) as client,
            client.watch(ENDPOINT, "a") as watch,
        ):
            first = await next_event(watch)
            assert isinstance(first, ResourceChanged), first


async def test_with_a_fallback_server_outages_of_either_keep_the_config_and_converge(
    variant: Variant,
) -> None:
    async with ControlPlane() as primary, ControlPlane() as fallback:
        primary.set(endpoints("a", port=1))
        fallback.set(endpoints("a", port=2))
        await primary.stop(keep_port=True)
        async with XdsClient(
            bootstrap=bootstrap([primary, fallback]),
            options=ClientOptions(backoff=FAST_BACKOFF),
            **variant,
        ) as client:
            client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
            await eventually(lambda: holds(client, endpoints("a", port=2)))  # the fallback's
            await primary.start()
            await eventually(lambda: holds(client, endpoints("a", port=1)))  # back on primary
            await fallback.stop()  # unused now: its outage changes nothing
            for port in (3, 4):
                await primary.restart()
                primary.set(endpoints("a", port=port))
                await eventually(lambda port=port: holds(client, endpoints("a", port=port)))
            assert fallback.stream_count == 0


async def test_a_new_client_connects_to_a_server_where_an_old_one_was_refused(
    variant: Variant,
) -> None:
    """Two clients in one process, one port: the first saw its server go away (refused, in
    gRPC's reconnect backoff); a server now listens on that port again. A new client's first
    event is the resource, not the first client's old "connection refused" (gRPC's global
    subchannel pool would share that subchannel and its backoff between the two)."""
    options = ClientOptions(backoff=FAST_BACKOFF)
    server = ControlPlane()
    await server.start()
    try:
        server.set_all([endpoints("a")])
        target = f"127.0.0.1:{server.port}"
        old = XdsClient(target, node_id="n", options=options, **variant)
        await old.start()
        old_watch = old.watch(ENDPOINT, "a")
        assert isinstance(await next_event(old_watch), ResourceChanged)
        await server.stop(keep_port=True)  # no other socket takes the port until it serves again
        try:
            assert isinstance(await next_event(old_watch), AmbientError)  # refused from now on
            await server.start()
            server.set_all([endpoints("a")])
            new = XdsClient(target, node_id="n", options=options, **variant)
            async with new, new.watch(ENDPOINT, "a") as new_watch:
                assert isinstance(await next_event(new_watch), ResourceChanged)
        finally:
            old_watch.cancel()
            await old.close()
    finally:
        await server.stop()
