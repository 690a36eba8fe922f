"""Client construction, backoff arithmetic and the Watch object's lifetime."""

from __future__ import annotations

import gc
import importlib

import pytest
from google.protobuf import descriptor_pool

from tests.builders import cluster
from tests.client.conftest import next_event
from tests.helpers import eventually
from xdsclient import Backoff, CallbackWatcher, ResourceChanged, XdsClient
from xdsclient.resources import CLUSTER, ResourceType
from xdsclient.resources._type import V2_TYPE_URLS, removed_v2_type
from xdsclient.testing import ControlPlane


def test_backoff_grows_by_the_multiplier_with_bounded_jitter_and_a_cap() -> None:
    backoff = Backoff()
    assert [backoff.delay(n, 0.5) for n in range(3)] == pytest.approx([1.0, 1.6, 2.56])
    assert backoff.delay(0, 0.0) == pytest.approx(0.8)
    assert backoff.delay(0, 0.999999) == pytest.approx(1.2, rel=1e-5)
    assert backoff.delay(50, 0.5) == 120.0
    # Days of outage: the attempt count keeps growing and must never overflow the arithmetic.
    assert backoff.delay(100_000, 0.5) == 120.0


def test_backoff_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="initial must be positive"):
        Backoff(initial=0)
    with pytest.raises(ValueError, match="jitter"):
        Backoff(jitter=1.5)


def test_server_and_bootstrap_are_exclusive_and_custom_types_need_ads() -> None:
    with pytest.raises(ValueError, match="either a server address or a bootstrap"):
        XdsClient("a:1", bootstrap={})
    custom = ResourceType(type_url="type.googleapis.com/my.Thing", decode=lambda b: ("x", b))
    with pytest.raises(
        ValueError, match=r"no per-type xDS service carries type\.googleapis\.com/my\.Thing"
    ):
        XdsClient("a:1", resource_types=[custom], ads=False)


async def test_watching_before_start_or_an_unknown_type_is_an_error(
    control_plane: ControlPlane,
) -> None:
    client = XdsClient(control_plane.address)
    with pytest.raises(RuntimeError, match="not started"):
        client.watch(CLUSTER, "a")
    async with client:
        with pytest.raises(ValueError, match="unknown resource type"):
            client.watch("type.googleapis.com/not.Registered", "a")
    async with XdsClient(control_plane.address, ads=False, delta=False) as per_type:
        with pytest.raises(ValueError, match="no SotW per-type service carries"):
            per_type.watch("type.googleapis.com/envoy.config.route.v3.VirtualHost", "vh")


@pytest.mark.parametrize(
    ("v2", "v3"),
    [
        ("envoy.api.v2.Listener", "envoy.config.listener.v3.Listener"),
        ("envoy.api.v2.RouteConfiguration", "envoy.config.route.v3.RouteConfiguration"),
        ("envoy.api.v2.Cluster", "envoy.config.cluster.v3.Cluster"),
        ("envoy.api.v2.ClusterLoadAssignment", "envoy.config.endpoint.v3.ClusterLoadAssignment"),
        ("envoy.api.v2.auth.Secret", "envoy.extensions.transport_sockets.tls.v3.Secret"),
        ("envoy.api.v2.route.VirtualHost", "envoy.config.route.v3.VirtualHost"),
    ],
)
async def test_an_xds_v2_type_url_says_v2_was_removed_and_names_the_v3_url(
    control_plane: ControlPlane, v2: str, v3: str
) -> None:
    """watch, add_watcher and resource_state refuse a v2 type URL saying what to use instead,
    not that the type is unknown."""
    v2_url, v3_url = f"type.googleapis.com/{v2}", f"type.googleapis.com/{v3}"
    expected = f"{v2_url} is an xDS v2 type, and xDS v2 was removed: use {v3_url}"
    async with XdsClient(control_plane.address) as client:
        with pytest.raises(ValueError, match="xDS v2 was removed") as watched:
            client.watch(v2_url, "a")
        with pytest.raises(ValueError, match="xDS v2 was removed") as added:
            client.add_watcher(v2_url, "a", CallbackWatcher(lambda event: None))
        with pytest.raises(ValueError, match="xDS v2 was removed") as looked_up:
            client.resource_state(v2_url, "a")
    assert str(watched.value) == str(added.value) == str(looked_up.value) == expected


def test_every_v3_url_named_for_a_v2_one_is_a_real_message() -> None:
    """The replacements are message names protobuf knows (no typo sends users astray)."""
    for module in ("route.v3.scoped_route_pb2", "route.v3.route_components_pb2"):
        importlib.import_module(f"envoy.config.{module}")
    importlib.import_module("envoy.extensions.transport_sockets.tls.v3.secret_pb2")
    importlib.import_module("envoy.service.runtime.v3.rtds_pb2")
    pool = descriptor_pool.Default()
    assert len(V2_TYPE_URLS) == 8
    for v2, v3 in V2_TYPE_URLS.items():
        assert removed_v2_type(v2) is not None
        assert pool.FindMessageTypeByName(v3.removeprefix("type.googleapis.com/"))


async def test_breaking_out_of_the_loop_unsubscribes(control_plane: ControlPlane) -> None:
    control_plane.set(cluster("a"))
    async with XdsClient(control_plane.address, node_id="n") as client:

        async def leave() -> None:
            async for event in client.watch(CLUSTER, "a"):
                assert isinstance(event, ResourceChanged)
                break
            gc.collect()

        # The dropped watch unsubscribes, and says it should have been left with `async with`.
        with pytest.warns(ResourceWarning, match="never cancelled"):
            await leave()
        await eventually(lambda: client.resource_state(CLUSTER, "a") is None)
        await eventually(lambda: list(control_plane.requests[-1].message.resource_names) == [])


async def test_a_cancelled_watch_ends_its_iteration(control_plane: ControlPlane) -> None:
    control_plane.set(cluster("a"))
    async with XdsClient(control_plane.address, node_id="n") as client:
        watch = client.watch(CLUSTER, "a")
        assert isinstance(await next_event(watch), ResourceChanged)
        watch.cancel()
        assert [event async for event in watch] == []
