"""End to end over every variant: NACKs, server restarts, broken streams, message limits."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from tests.builders import cluster, endpoints, strict_clusters
from tests.client.conftest import FAST_BACKOFF, Variant, next_event
from tests.helpers import eventually
from xdsclient import (
    AmbientError,
    ClientOptions,
    DataError,
    ResourceChanged,
    ResourceStatus,
    ResourceValidationError,
    TransportError,
    XdsClient,
)
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane


@pytest.fixture
async def strict_client(control_plane: ControlPlane, variant: Variant) -> Any:
    async with XdsClient(
        control_plane.address,
        node_id="test-node",
        resource_types=[strict_clusters()],
        options=ClientOptions(does_not_exist_timeout=1.0, backoff=FAST_BACKOFF),
        **variant,
    ) as c:
        yield c


async def test_an_invalid_resource_is_nacked_while_the_valid_ones_apply(
    control_plane: ControlPlane, strict_client: XdsClient
) -> None:
    control_plane.set(cluster("good"))
    control_plane.set(cluster("bad"))
    async with (
        strict_client.watch(CLUSTER, "good") as good,
        strict_client.watch(CLUSTER, "bad") as bad,
    ):
        assert isinstance(await next_event(good), ResourceChanged)
        assert isinstance(await next_event(bad), ResourceChanged)
        control_plane.set(cluster("bad", timeout_s=99))
        control_plane.set(cluster("good", timeout_s=2))
        rejected = await next_event(bad)
        assert isinstance(rejected, AmbientError)  # the last good "bad" is still usable
        assert isinstance(rejected.error, ResourceValidationError)
        changed = await next_event(good)
        assert isinstance(changed, ResourceChanged)
        assert changed.value.proto.connect_timeout.seconds == 2
        await eventually(lambda: control_plane.nacks(CLUSTER.type_url))
        message = control_plane.nacks(CLUSTER.type_url)[0].message.error_detail.message
        assert message == 'Cluster "bad": connect_timeout: must be at most 60s'
        state = strict_client.resource_state(CLUSTER, "bad")
        assert state is not None
        assert state.status is ResourceStatus.NACKED_BUT_CACHED
        assert state.value.proto == cluster("bad")


async def test_a_server_restart_keeps_the_cache_and_resumes_from_the_versions_held(
    control_plane: ControlPlane, client: XdsClient, variant: Variant
) -> None:
    control_plane.set(cluster("a"))
    async with client.watch(CLUSTER, "a") as updates:
        first = await next_event(updates)
        assert isinstance(first, ResourceChanged)
        await eventually(lambda: control_plane.acks(CLUSTER.type_url))
        await control_plane.stop(keep_port=True)
        state = client.resource_state(CLUSTER, "a")
        assert state is not None
        assert state.status is ResourceStatus.ACKED
        mark = len(control_plane.requests)
        await control_plane.start()
        resumed = await control_plane.wait_for_request(
            lambda r: r.type_url == CLUSTER.type_url, start=mark
        )
        if variant["delta"]:
            assert dict(resumed.message.initial_resource_versions) == {"a": first.version}
        else:
            assert resumed.message.version_info == first.version
            assert resumed.message.response_nonce == ""
        assert resumed.message.node.id == "test-node"
        control_plane.set(cluster("a", timeout_s=4))
        event = await next_event(updates)
        while isinstance(event, AmbientError):  # reconnects that failed while it was down
            assert isinstance(event.error, TransportError)
            event = await next_event(updates)
        assert isinstance(event, ResourceChanged)
        assert event.value.proto.connect_timeout.seconds == 4


async def test_a_stream_that_dies_before_any_response_reports_a_connectivity_error(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.pause()
    async with client.watch(ENDPOINT, "a") as updates:
        await control_plane.wait_for_request(lambda r: r.type_url == ENDPOINT.type_url)
        control_plane.close_streams(grpc.StatusCode.UNAVAILABLE, "maintenance")
        event = await next_event(updates)
        assert isinstance(event, DataError)
        assert isinstance(event.error, TransportError)
        assert event.error.code == "UNAVAILABLE"
        assert "maintenance" in str(event.error)
        control_plane.set(endpoints("a"))
        control_plane.resume()
        assert isinstance(await next_event(updates), ResourceChanged)


async def test_a_connectivity_error_is_ambient_when_a_value_is_cached(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(endpoints("a"))
    async with client.watch(ENDPOINT, "a") as updates:
        assert isinstance(await next_event(updates), ResourceChanged)
        control_plane.pause()
        control_plane.close_streams()  # after a response: not reported
        mark = len(control_plane.requests)
        await control_plane.wait_for_request(
            lambda r: r.type_url == ENDPOINT.type_url and not r.message.response_nonce, start=mark
        )
        control_plane.close_streams()  # the new stream had no response: reported, value kept
        event = await next_event(updates)
        assert isinstance(event, AmbientError)
        assert isinstance(event.error, TransportError)
        state = client.resource_state(ENDPOINT, "a")
        assert state is not None
        assert state.status is ResourceStatus.ACKED


async def test_a_message_over_the_receive_limit_is_a_clear_error(
    control_plane: ControlPlane, variant: Variant
) -> None:
    for i in range(50):
        control_plane.set(cluster(f"cluster-{i:03d}-" + "x" * 100))
    async with (
        XdsClient(
            control_plane.address,
            node_id="n",
            options=ClientOptions(max_receive_message_length=1024, backoff=FAST_BACKOFF),
            **variant,
        ) as client,
        client.watch(CLUSTER, "*") as updates,
    ):
        event = await next_event(updates)
        assert isinstance(event, DataError)
        assert isinstance(event.error, TransportError)
        assert "larger than max_receive_message_length (1024 bytes)" in str(event.error)


async def test_closing_the_client_ends_its_streams(
    control_plane: ControlPlane, variant: Variant
) -> None:
    control_plane.set(cluster("a"))
    async with (
        XdsClient(control_plane.address, node_id="n", **variant) as client,
        client.watch(CLUSTER, "a") as updates,
    ):
        await next_event(updates)
        assert control_plane.stream_count >= 1
    await eventually(lambda: control_plane.stream_count == 0)
