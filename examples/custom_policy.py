"""A load-balancing policy of your own (gRFC A52): least latency, used by a real stub.

``LeastLatency`` keeps a moving average of how long each endpoint's calls took (the
``call_ended`` hook tells it) and sends each call to the READY endpoint with the lowest, trying
an endpoint it has no figure for first and, with probability ``explore``, a random one (so a
slow endpoint that got faster is noticed). It is registered under the type
``example.LeastLatency``; the control plane's cluster names it in ``load_balancing_policy`` with
a ``TypedStruct`` whose fields (``{"explore": 0.05}``) reach the factory as a dict. Two grpc.aio
backends serve one method, ``slow`` taking 20 ms more per call: nearly every call goes to
``fast``.

    python examples/custom_policy.py
"""

from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import struct_pb2, wrappers_pb2
from xds.type.v3 import typed_struct_pb2

from xdsclient import XdsClient
from xdsclient.grpc import CallEnd, XdsChannel, register_lb_policy
from xdsclient.lb import (
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickRequest,
    PickResult,
    aggregate_state,
    key_of,
)
from xdsclient.resources import Endpoint, LocalityEndpoints
from xdsclient.testing import ControlPlane, builders

Text = wrappers_pb2.StringValue
METHOD = "/demo.Greeter/Hello"
POLICY = "example.LeastLatency"


class LeastLatency:
    """Each call to the READY endpoint whose calls were quickest lately (see the module)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.explore = float(config.get("explore", 0.0))
        self.endpoints: tuple[Endpoint, ...] = ()
        self.states: dict[EndpointKey, ConnectivityState] = {}
        #: each endpoint's moving average latency, in seconds
        self.latency: dict[EndpointKey, float] = {}

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        """The endpoints of every locality of the priority."""
        self.endpoints = tuple(e for locality in localities for e in locality.endpoints)

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """An endpoint's connectivity."""
        self.states[key] = state

    def state(self) -> ConnectivityState:
        """gRPC's aggregation over the endpoints."""
        idle = ConnectivityState.IDLE
        return aggregate_state(self.states.get(key_of(e), idle) for e in self.endpoints)

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Every endpoint, connected."""
        return self.endpoints

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """The quickest READY endpoint (an unmeasured one first; sometimes a random one)."""
        ready = [e for e in self.endpoints if self.states.get(key_of(e)) is ConnectivityState.READY]
        if not ready:
            return PickResult(outcome=PickOutcome.QUEUE)
        if rand.random() < self.explore:
            chosen = rand.choice(ready)
        else:
            chosen = min(ready, key=lambda e: self.latency.get(key_of(e), -1.0))
        return PickResult(outcome=PickOutcome.COMPLETE, endpoint=chosen)

    def call_ended(self, key: EndpointKey, end: CallEnd) -> None:
        """A call's latency, into the endpoint's moving average."""
        before = self.latency.get(key)
        self.latency[key] = end.elapsed if before is None else 0.7 * before + 0.3 * end.elapsed


async def start_backend(name: str, delay: float) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server answering with its name after ``delay`` seconds."""

    async def hello(request: Any, context: Any) -> Any:
        await asyncio.sleep(delay)
        return Text(value=f"{name} says hello to {request.value}")

    handler = grpc.unary_unary_rpc_method_handler(hello, Text.FromString, Text.SerializeToString)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("demo.Greeter", {"Hello": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def cluster() -> Any:
    """Cluster ``greeter`` balanced by ``example.LeastLatency`` (round robin if unknown)."""
    message = builders.cluster("greeter")
    config = struct_pb2.Struct()
    config.update({"explore": 0.05})
    policy = message.load_balancing_policy.policies.add().typed_extension_config
    policy.name = "least-latency"
    policy.typed_config.Pack(
        typed_struct_pb2.TypedStruct(type_url=f"type.googleapis.com/{POLICY}", value=config)
    )
    return message


async def main(calls: int = 100) -> collections.Counter[str]:
    """Register the policy, serve, call, and count which backend answered."""
    register_lb_policy(POLICY, LeastLatency)
    fast, fast_port = await start_backend("fast", 0.0)
    slow, slow_port = await start_backend("slow", 0.02)
    try:
        async with ControlPlane() as plane:
            plane.set(builders.api_listener("greeter", route_config_name="greeter-routes"))
            plane.set(builders.route_configuration("greeter-routes", "greeter"))
            plane.set(cluster())
            plane.set(
                builders.cluster_load_assignment(
                    "greeter", [("127.0.0.1", fast_port), ("127.0.0.1", slow_port)]
                )
            )
            async with (
                XdsClient(plane.address, node_id="example") as client,
                XdsChannel("xds:///greeter", client=client, rng=random.Random(7)) as channel,
            ):
                hello = channel.unary_unary(
                    METHOD,
                    request_serializer=Text.SerializeToString,
                    response_deserializer=Text.FromString,
                )
                answered: collections.Counter[str] = collections.Counter()
                for _ in range(calls):
                    reply = await hello(Text(value="you"), timeout=5, wait_for_ready=True)
                    answered[reply.value.split()[0]] += 1
        return answered
    finally:
        register_lb_policy(POLICY, None)
        await fast.stop(None)
        await slow.stop(None)


if __name__ == "__main__":
    print(dict(asyncio.run(main())))
