"""A consumer that leaves or stops reading never stalls another watcher."""

from __future__ import annotations

import gc

import pytest

from tests.builders import cluster
from tests.client.conftest import next_event
from tests.helpers import eventually
from xdsclient import ResourceChanged, XdsClient
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


async def test_leaving_async_for_with_events_queued_unsubscribes_and_stalls_no_one(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set_all(cluster(f"c{i}") for i in range(40))
    async with client.watch(CLUSTER, "c0") as other:
        assert isinstance(await next_event(other), ResourceChanged)

        async def leave_with_events_queued() -> None:
            everything = client.watch(CLUSTER, "*")
            await eventually(lambda: len(client.resource_states()) == 40)  # 39 events queued
            async for _ in everything:
                break
            del everything
            gc.collect()

        with pytest.warns(ResourceWarning, match="never cancelled"):
            await leave_with_events_queued()
        control_plane.set(cluster("c0", timeout_s=9))
        update = await next_event(other)
        assert isinstance(update, ResourceChanged)
        assert update.value.proto.connect_timeout.seconds == 9

        def unsubscribed() -> bool:
            requests = [r for r in control_plane.requests if r.type_url == CLUSTER.type_url]
            if requests[-1].is_delta:
                return any("*" in r.message.resource_names_unsubscribe for r in requests)
            return list(requests[-1].message.resource_names) == ["c0"]

        await eventually(unsubscribed)


async def test_a_consumer_that_stops_reading_gets_the_latest_state_later(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(cluster("a"))
    async with client.watch(CLUSTER, "a") as idle, client.watch(CLUSTER, "a") as busy:
        assert isinstance(await next_event(busy), ResourceChanged)
        for seconds in range(6, 30):
            control_plane.set(cluster("a", timeout_s=seconds))
            update = await next_event(busy)
            assert isinstance(update, ResourceChanged)
            assert update.value.proto.connect_timeout.seconds == seconds
        latest = await next_event(idle)  # conflated: only the latest state waited for it
        assert isinstance(latest, ResourceChanged)
        assert latest.value.proto.connect_timeout.seconds == 29
