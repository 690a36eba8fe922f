"""End to end over every transport variant: watching, updates, deletion, wildcard, timers."""

from __future__ import annotations

from tests.builders import cluster, endpoints
from tests.client.conftest import FAST_BACKOFF, Variant, next_event
from tests.helpers import eventually
from xdsclient import (
    CallbackWatcher,
    ClientOptions,
    DataError,
    Event,
    ResourceChanged,
    ResourceDoesNotExistError,
    ResourceExpiredError,
    ResourceStatus,
    ResourceTimeoutError,
    XdsClient,
)
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane, FakeClock


async def test_a_watch_receives_the_resource_and_its_updates(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(cluster("a"))
    async with client.watch(CLUSTER, "a") as updates:
        first = await next_event(updates)
        assert isinstance(first, ResourceChanged)
        assert first.value.proto == cluster("a")
        control_plane.set(cluster("a", timeout_s=9))
        second = await next_event(updates)
        assert isinstance(second, ResourceChanged)
        assert second.value.proto.connect_timeout.seconds == 9


async def test_deleting_a_cluster_reaches_the_watcher(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(cluster("a"))
    control_plane.set(cluster("b"))
    async with client.watch(CLUSTER, "a") as updates:
        assert isinstance(await next_event(updates), ResourceChanged)
        control_plane.remove(CLUSTER.type_url, "a")
        gone = await next_event(updates)
        assert isinstance(gone, DataError)
        assert isinstance(gone.error, ResourceDoesNotExistError)
        assert not isinstance(gone.error, ResourceTimeoutError)


async def test_a_wildcard_watch_sees_every_cluster(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(cluster("a"))
    control_plane.set(cluster("b"))
    async with client.watch(CLUSTER, "*") as updates:
        names = {(await next_event(updates)).name for _ in range(2)}
        assert names == {"a", "b"}
        control_plane.set(cluster("c"))
        assert (await next_event(updates)).name == "c"


async def test_a_missing_resource_is_reported_after_the_timeout_or_at_once_in_delta(
    client: XdsClient,
) -> None:
    async with client.watch(ENDPOINT, "missing") as updates:
        event = await next_event(updates)
        assert isinstance(event, DataError)
        state = client.resource_state(ENDPOINT, "missing")
        assert state is not None
        if client.options.delta:  # the server sends a body-less Resource for it
            assert not isinstance(event.error, ResourceTimeoutError)
            assert state.status is ResourceStatus.DOES_NOT_EXIST
        else:  # SotW has no way to say so: the does-not-exist timer (gRFC A57)
            assert isinstance(event.error, ResourceTimeoutError)
            assert state.status is ResourceStatus.DOES_NOT_EXIST  # gRFC A88: not TIMEOUT


async def test_a_resource_created_after_its_timeout_is_delivered(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    async with client.watch(ENDPOINT, "late") as updates:
        assert isinstance(await next_event(updates), DataError)
        control_plane.set(endpoints("late"))
        assert isinstance(await next_event(updates), ResourceChanged)


async def test_an_expired_ttl_removes_the_resource_and_heartbeats_keep_it(
    control_plane: ControlPlane, variant: Variant
) -> None:
    """Over real gRPC, on the client's fake clock: a resource whose 1.5 s TTL passes expires,
    one the server heartbeats every 0.5 s stays. Each step waits for the heartbeat to arrive
    (its new deadline) before time moves, so a loaded machine changes nothing."""
    control_plane.set(cluster("kept"), ttl=1.5)
    control_plane.set(cluster("dies"), ttl=1.5)
    clock = FakeClock()
    options = ClientOptions(does_not_exist_timeout=15.0, backoff=FAST_BACKOFF)
    async with (
        XdsClient(
            control_plane.address, node_id="n", clock=clock, options=options, **variant
        ) as client,
        client.watch(CLUSTER, "kept") as kept,
        client.watch(CLUSTER, "dies") as dies,
    ):
        assert isinstance(await next_event(kept), ResourceChanged)
        assert isinstance(await next_event(dies), ResourceChanged)

        def refreshed() -> bool:
            state = client.resource_state(CLUSTER, "kept")
            return state is not None and state.expires_at == clock.time() + 1.5

        for _ in range(4):  # heartbeats at 0, 0.5, 1.0 and 1.5 s; "dies" expires at 1.5 s
            control_plane.heartbeat(CLUSTER.type_url, "kept")
            await eventually(refreshed, what=f"the heartbeat at {clock.time()} s")
            clock.advance(0.5)
        expired = await next_event(dies, timeout=3)
        assert isinstance(expired, DataError)
        assert isinstance(expired.error, ResourceExpiredError)
        state = client.resource_state(CLUSTER, "kept")
        assert state is not None
        assert state.status is ResourceStatus.ACKED


async def test_a_new_watcher_first_gets_the_cached_value_and_unchanged_resends_do_not_notify(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(cluster("a"))
    control_plane.set(cluster("b"))
    async with (
        client.watch(CLUSTER, "a") as first,
        client.watch(CLUSTER, "b") as other,
    ):
        assert isinstance(await next_event(first), ResourceChanged)
        assert isinstance(await next_event(other), ResourceChanged)
        async with client.watch(CLUSTER, "a") as second:
            cached = await next_event(second, timeout=1)
            assert isinstance(cached, ResourceChanged)
            assert cached.value.proto == cluster("a")
        # Changing "b" resends the whole CDS state in SotW; "a" in it is unchanged, and
        # "a" changing next is the first thing its watcher hears of (nothing came in between).
        control_plane.set(cluster("b", timeout_s=7))
        assert isinstance(await next_event(other), ResourceChanged)
        control_plane.set(cluster("a", timeout_s=8))
        after = await next_event(first)
        assert isinstance(after, ResourceChanged)
        assert after.value.proto.connect_timeout.seconds == 8


async def test_many_watchers_share_one_subscription(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(endpoints("a"))
    seen: list[list[Event]] = [[] for _ in range(20)]
    handles = [client.add_watcher(ENDPOINT, "a", CallbackWatcher(box.append)) for box in seen]
    await eventually(lambda: all(box for box in seen))
    subscriptions = [
        r
        for r in control_plane.requests
        if r.type_url == ENDPOINT.type_url and not r.message.response_nonce
    ]
    assert len(subscriptions) == 1
    for handle in handles:
        handle.cancel()


async def test_a_watcher_that_raises_does_not_break_the_others(
    control_plane: ControlPlane, client: XdsClient, caplog: object
) -> None:
    def explode(event: Event) -> None:
        raise RuntimeError("watcher bug")

    control_plane.set(cluster("a"))
    client.add_watcher(CLUSTER, "a", CallbackWatcher(explode))
    async with client.watch(CLUSTER, "a") as updates:
        assert isinstance(await next_event(updates), ResourceChanged)
        control_plane.set(cluster("a", timeout_s=3))
        assert isinstance(await next_event(updates), ResourceChanged)
