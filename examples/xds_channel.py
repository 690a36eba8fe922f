"""Proxyless gRPC: a stub over `xdsclient.grpc.XdsChannel`, routed by the control plane.

Two grpc.aio backends, ``stable`` and ``canary``, serve one method. The embedded control plane
sends 90% of the calls to ``stable`` and 10% to ``canary``, and every call carrying the header
``x-canary: yes`` to ``canary``; the route retries UNAVAILABLE twice. The stub is what generated
code would write (``channel.unary_unary(...)`` with serializers).

    python examples/xds_channel.py
"""

from __future__ import annotations

import asyncio
import collections
import random
from typing import Any

import grpc
from envoy.config.route.v3 import route_pb2
from google.protobuf import wrappers_pb2

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane, builders

Text = wrappers_pb2.StringValue
METHOD = "/demo.Greeter/Hello"


async def start_backend(name: str) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server whose one method answers with its name."""

    async def hello(request: Any, context: Any) -> Any:
        return Text(value=f"{name} says hello to {request.value}")

    handler = grpc.unary_unary_rpc_method_handler(hello, Text.FromString, Text.SerializeToString)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("demo.Greeter", {"Hello": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def routes() -> Any:
    """The header route first, then the 90/10 split; both retry UNAVAILABLE twice."""
    config = route_pb2.RouteConfiguration(name="greeter-routes")
    vhost = config.virtual_hosts.add(name="greeter", domains=["*"])
    vhost.retry_policy.retry_on = "unavailable"
    vhost.retry_policy.num_retries.value = 2
    canary = vhost.routes.add()
    canary.match.prefix = "/"
    canary.match.headers.add(name="x-canary").string_match.exact = "yes"
    canary.route.cluster = "canary"
    split = vhost.routes.add()
    split.match.prefix = "/"
    for name, weight in (("stable", 90), ("canary", 10)):
        split.route.weighted_clusters.clusters.add(name=name).weight.value = weight
    return config


async def main(calls: int = 200) -> dict[str, collections.Counter[str]]:
    """Serve, call, and count where the calls went."""
    stable, stable_port = await start_backend("stable")
    canary, canary_port = await start_backend("canary")
    try:
        async with ControlPlane() as plane:
            plane.set(builders.api_listener("greeter", route_config_name="greeter-routes"))
            plane.set(routes())
            for name, port in (("stable", stable_port), ("canary", canary_port)):
                plane.set(builders.cluster(name))
                plane.set(builders.cluster_load_assignment(name, [("127.0.0.1", port)]))
            async with (
                XdsClient(plane.address, node_id="example") as client,
                XdsChannel("xds:///greeter", client=client, rng=random.Random(7)) as channel,
            ):
                hello = channel.unary_unary(
                    METHOD,
                    request_serializer=Text.SerializeToString,
                    response_deserializer=Text.FromString,
                )
                split: collections.Counter[str] = collections.Counter()
                for _ in range(calls):
                    reply = await hello(Text(value="you"), timeout=5)
                    split[reply.value.split()[0]] += 1
                pinned: collections.Counter[str] = collections.Counter()
                for _ in range(10):
                    reply = await hello(
                        Text(value="you"), timeout=5, metadata=[("x-canary", "yes")]
                    )
                    pinned[reply.value.split()[0]] += 1
        return {"split": split, "x-canary: yes": pinned}
    finally:
        await stable.stop(None)
        await canary.stop(None)


if __name__ == "__main__":
    for name, counts in asyncio.run(main()).items():
        print(f"{name}: {dict(counts)}")
