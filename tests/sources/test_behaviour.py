"""The same behaviour over gRPC, files and REST-JSON: updates, deletions, rejections that keep
the last good value, errors, replay to new watchers, and the config walk."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from tests.builders import cluster, endpoints, listener, routes
from tests.sources.conftest import Served, break_source, repair_source
from xdsclient import (
    AmbientError,
    DataError,
    Event,
    ResourceChanged,
    ResourceDoesNotExistError,
    ResourceStatus,
    ResourceValidationError,
    TransportError,
    XdsConfig,
)
from xdsclient.resources import CLUSTER


async def next_event(events: AsyncIterator[Event], timeout: float = 5.0) -> Event:
    async with asyncio.timeout(timeout):
        return await anext(events)


def bad_cluster(name: str) -> Any:
    message = cluster(name)
    message.eds_cluster_config.eds_config.path_config_source.path = "/nowhere"  # gRPC: invalid
    return message


async def test_updates_reach_the_watcher_in_order(served: Served) -> None:
    served.set(cluster("c", timeout_s=1))
    async with served.client() as client, client.watch(CLUSTER, "c") as events:
        first = await next_event(events)
        assert isinstance(first, ResourceChanged)
        served.set(cluster("c", timeout_s=2))
        second = await next_event(events)
        assert isinstance(second, ResourceChanged)
        assert second.value.proto.connect_timeout.seconds == 2


async def test_a_deleted_resource_is_reported_as_not_existing(served: Served) -> None:
    served.set(cluster("c"), cluster("other"))
    async with served.client() as client, client.watch(CLUSTER, "c") as events:
        assert isinstance(await next_event(events), ResourceChanged)
        served.remove(CLUSTER.type_url, "c")
        gone = await next_event(events)
        assert isinstance(gone, DataError)
        assert isinstance(gone.error, ResourceDoesNotExistError)


async def test_an_invalid_update_keeps_the_last_good_value_and_says_why(served: Served) -> None:
    served.set(cluster("c"), cluster("d"))
    async with served.client() as client, client.watch(CLUSTER, "c") as events:
        assert isinstance(await next_event(events), ResourceChanged)
        served.set(bad_cluster("c"), cluster("d", timeout_s=9))
        rejected = await next_event(events)
        assert isinstance(rejected, AmbientError)
        assert isinstance(rejected.error, ResourceValidationError)
        assert "eds_config" in str(rejected.error)
        state = client.resource_state(CLUSTER, "c")
        assert state is not None
        assert state.status is ResourceStatus.NACKED_BUT_CACHED
        async with client.watch(CLUSTER, "d") as others:  # valid ones beside it were applied
            applied = await next_event(others)
            assert isinstance(applied, ResourceChanged)
            assert applied.value.proto.connect_timeout.seconds == 9


async def test_a_new_watcher_first_receives_the_cached_state(served: Served) -> None:
    served.set(cluster("c"))
    async with served.client() as client:
        async with client.watch(CLUSTER, "c") as events:
            assert isinstance(await next_event(events), ResourceChanged)
        async with client.watch(CLUSTER, "c") as again:
            replayed = await next_event(again)
            assert isinstance(replayed, ResourceChanged)


async def test_the_config_walk_delivers_a_complete_snapshot(served: Served) -> None:
    served.set(listener("l"), routes("c"), cluster("c"), endpoints("c"))
    async with served.client() as client, client.watch_config("l") as configs:
        async with asyncio.timeout(5):
            snapshot = await anext(configs)
        assert isinstance(snapshot, XdsConfig)
        assert set(snapshot.clusters) == {"c"}
        assert snapshot.clusters["c"].endpoints is not None


async def test_an_unreachable_source_is_a_data_error_until_it_is_back(served: Served) -> None:
    served.set(cluster("c"))
    await break_source(served)
    async with served.client() as client, client.watch(CLUSTER, "c") as events:
        error = await next_event(events)
        assert isinstance(error, DataError)
        assert isinstance(error.error, TransportError)
        await repair_source(served)
        served.set(cluster("c"))
        async with asyncio.timeout(5):
            while not isinstance(await anext(events), ResourceChanged):
                pass
