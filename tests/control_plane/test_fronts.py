"""The gRPC and REST front ends over a store, on loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import grpc
from envoy.service.discovery.v3 import discovery_pb2

from xdsclient.testing import ControlPlane
from xdsclient.testing._records import Journal
from xdsclient.testing._rest_endpoint import RestEndpoint
from xdsclient.testing._store import ResourceStore

from .helpers import EDS, message, set_

_ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"


async def _open(channel: Any, names: list[str]) -> Any:
    call = channel.stream_stream(
        _ADS,
        request_serializer=discovery_pb2.DiscoveryRequest.SerializeToString,
        response_deserializer=discovery_pb2.DiscoveryResponse.FromString,
    )()
    await call.write(discovery_pb2.DiscoveryRequest(type_url=EDS, resource_names=names))
    return call


async def _ack(call: Any, names: list[str]) -> Any:
    response = await call.read()
    request = discovery_pb2.DiscoveryRequest(
        type_url=EDS,
        resource_names=names,
        version_info=response.version_info,
        response_nonce=response.nonce,
    )
    await call.write(request)
    return response


async def test_one_push_reaches_every_one_of_many_streams() -> None:
    """Sixty streams over three connections each get their assignments, then one update of
    all of them, with one response each and distinct nonces."""
    names = [f"c{i}" for i in range(10)]
    async with ControlPlane() as cp:
        cp.set_all(message(EDS, name) for name in names)
        options = [("grpc.use_local_subchannel_pool", 1)]
        channels = [grpc.aio.insecure_channel(cp.address, options=options) for _ in range(3)]
        try:
            calls = [await _open(channels[i % 3], names) for i in range(60)]
            first = await asyncio.gather(*(_ack(call, names) for call in calls))
            assert {len(r.resources) for r in first} == {10}
            cp.set_all(message(EDS, name, generation=1) for name in names)
            pushed = await asyncio.gather(*(_ack(call, names) for call in calls))
            assert {r.version_info for r in pushed} == {cp.version(EDS, "c9")}
            assert {len(r.resources) for r in pushed} == {10}
            assert len({r.nonce for r in pushed}) == 60
            assert cp.stream_count == 60
        finally:
            for channel in channels:
                await channel.close()


async def test_the_rest_endpoint_serves_a_store_and_journal_alone() -> None:
    """The REST front end needs only a store and a journal: it answers a poll from the store,
    304 once current, and records both."""
    store, journal = ResourceStore(), Journal()
    set_(store, EDS, "a")
    endpoint = RestEndpoint(
        store, journal, paused=lambda: False, long_poll=False, hold=1.0, ssl_context=None
    )
    await endpoint.start()
    try:
        url = f"{endpoint.url}/v3/discovery:endpoints"
        async with aiohttp.ClientSession() as session:
            body = {"node": {"id": "n"}, "resource_names": ["a"]}
            async with session.post(url, json=body) as reply:
                assert reply.status == 200
                version = (await reply.json())["version_info"]
            async with session.post(url, json={**body, "version_info": version}) as reply:
                assert reply.status == 304
    finally:
        await endpoint.stop()
    assert [r.method for r in journal.requests] == ["REST endpoints"] * 2
    assert [r.names for r in journal.responses] == [("a",)]
