"""`XdsClient.wait_for`: the first value satisfying a predicate, against the real control plane."""

from __future__ import annotations

import asyncio

import pytest
from envoy.config.cluster.v3 import cluster_pb2

from tests.client.conftest import FAST_BACKOFF, Variant
from tests.helpers import eventually
from xdsclient import (
    ClientClosedError,
    ClientOptions,
    WaitTimeoutError,
    XdsClient,
    XdsConfig,
    XdsError,
)
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER
from xdsclient.testing import ControlPlane, FakeClock, builders


async def test_wait_for_returns_a_cached_value_without_a_predicate(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(builders.cluster("a"))
    view = await client.wait_for(CLUSTER, "a", timeout=5)
    assert view.name == "a"


async def test_wait_for_skips_values_until_the_predicate_holds(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(builders.cluster_load_assignment("a", [("10.0.0.1", 80)]))
    waiting = asyncio.create_task(
        client.wait_for(
            ENDPOINT, "a", lambda view: len(view.priorities[0][0].endpoints) == 2, timeout=5
        )
    )
    await client.wait_for(ENDPOINT, "a", timeout=5)
    assert not waiting.done()
    control_plane.set(builders.cluster_load_assignment("a", [("10.0.0.1", 80), ("10.0.0.2", 80)]))
    view = await waiting
    assert len(view.priorities[0][0].endpoints) == 2


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_raises_a_timeout_naming_the_last_event(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(builders.cluster("a", connect_timeout=1))
    with pytest.raises(WaitTimeoutError, match="'a' did not satisfy") as raised:
        await client.wait_for(CLUSTER, "a", lambda view: False, timeout=0.3)
    assert isinstance(raised.value, XdsError)
    assert isinstance(raised.value, TimeoutError)
    assert "ResourceChanged" in str(raised.value)


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_without_a_predicate_says_nothing_arrived(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    """A resource that never comes: the timeout names it and says nothing arrived, not that a
    predicate (there is none) was not satisfied by a ``None`` event."""
    control_plane.pause()
    with pytest.raises(WaitTimeoutError) as raised:
        await client.wait_for(CLUSTER, "never", timeout=0.3)
    assert str(raised.value) == (
        "Cluster 'never': nothing arrived within 0.3s (waited for its first valid value)"
    )


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_without_a_predicate_names_the_error_that_came_instead(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    """A resource that is only ever invalid: the timeout names the error it got."""
    control_plane.set(cluster_pb2.Cluster(name="bad", type=cluster_pb2.Cluster.STATIC))
    with pytest.raises(WaitTimeoutError) as raised:
        await client.wait_for(CLUSTER, "bad", timeout=0.5)
    message = str(raised.value)
    assert message.startswith("Cluster 'bad': no valid value arrived within 0.5s; last event:")
    assert "DataError" in message
    assert "predicate" not in message


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_raises_when_the_client_closes(client: XdsClient) -> None:
    waiting = asyncio.create_task(client.wait_for(CLUSTER, "never", timeout=5))
    await asyncio.sleep(0)
    await client.close()
    with pytest.raises(ClientClosedError, match="closed while waiting"):
        await waiting


def shop(addresses: list[str]) -> list[object]:
    return [
        builders.api_listener("shop"),
        builders.route_configuration("shop-routes", {"/": "web"}),
        builders.cluster("web"),
        builders.cluster_load_assignment("web", [(address, 80) for address in addresses]),
    ]


def web_addresses(config: XdsConfig) -> list[str]:
    endpoints = config.clusters["web"].endpoints
    return [] if endpoints is None else [e.address for e in endpoints.healthy_endpoints()]


async def test_wait_for_config_returns_the_first_complete_configuration(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    """Without a predicate, the first complete snapshot of the listener."""
    control_plane.set_all(shop(["10.0.0.1"]))
    config = await client.wait_for_config("shop", timeout=5)
    assert isinstance(config, XdsConfig)
    assert web_addresses(config) == ["10.0.0.1"]


@pytest.mark.parametrize("variant", [{"ads": True, "delta": True}], indirect=True)
async def test_wait_for_config_skips_snapshots_until_the_predicate_holds(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    """Snapshots (and error snapshots) before the one the predicate accepts are passed over."""
    control_plane.set_all(shop(["10.0.0.1"])[:3])  # no endpoints yet: an unusable cluster
    waiting = asyncio.create_task(
        client.wait_for_config("shop", lambda c: web_addresses(c) == ["10.0.0.2"], timeout=5)
    )
    await client.wait_for_config("shop", timeout=5)  # the listener resolves meanwhile
    control_plane.set_all(shop(["10.0.0.1"]))
    await client.wait_for(ENDPOINT, "web", timeout=5)
    assert not waiting.done()
    control_plane.set_all(shop(["10.0.0.2"]))
    config = await waiting
    assert web_addresses(config) == ["10.0.0.2"]


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_config_raises_a_timeout_naming_the_last_update(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    """No accepted snapshot in time: `WaitTimeoutError`, saying what came last, in brief."""
    control_plane.set_all(shop(["10.0.0.1"]))
    with pytest.raises(WaitTimeoutError, match="listener 'shop'") as raised:
        await client.wait_for_config("shop", lambda config: False, timeout=0.5)
    assert "last update: a configuration of 1 cluster(s)" in str(raised.value)


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_config_names_the_error_when_the_listener_is_unusable(
    control_plane: ControlPlane, variant: Variant
) -> None:
    """A listener never sent times out naming the error the client reported for it. Its
    does-not-exist timer fires on the client's fake clock once the request is out, before the
    wait starts, so no race between the timer and the wait decides the message."""
    clock = FakeClock()
    options = ClientOptions(does_not_exist_timeout=1.0, backoff=FAST_BACKOFF)
    async with (
        XdsClient(
            control_plane.address, node_id="n", clock=clock, options=options, **variant
        ) as client,
        client.watch(LISTENER, "missing"),
    ):
        await eventually(
            lambda: any("missing" in r.message.resource_names for r in control_plane.requests)
        )
        clock.advance(1.0)

        def reported() -> bool:
            state = client.resource_state(LISTENER, "missing")
            return state is not None and state.error is not None

        await eventually(reported, what="the does-not-exist error")
        with pytest.raises(WaitTimeoutError, match="last update: ResourceTimeoutError: Listener"):
            await client.wait_for_config("missing", timeout=0.3)


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_config_raises_when_the_client_closes(client: XdsClient) -> None:
    """Closing the client ends the wait with `ClientClosedError`."""
    waiting = asyncio.create_task(client.wait_for_config("never", timeout=5))
    await asyncio.sleep(0)
    await client.close()
    with pytest.raises(ClientClosedError, match="closed while waiting for listener 'never'"):
        await waiting
