"""A custom load balancer on EDS data, built on the `xdsclient.lb` blocks: gRPC's priority
failover, locality weights and round robin, with health filtering, sending real grpc.aio calls to
local backends and following endpoint changes.

Three grpc.aio backend servers (a, b, c) and a fallback run on 127.0.0.1; the embedded control
plane publishes their addresses in a ClusterLoadAssignment: zone-a (a, b) and zone-b (c) at
priority 0 weighted 3:1, zone-c (fallback) at priority 1. The balancer watches that assignment
and rebuilds its picker on every change:

- priority: `PriorityPolicy`, gRPC's failover (the first usable priority);
- locality and endpoint: `child_policy_for(RoundRobin())`, gRPC's weighted target (a weighted
  random choice of locality) over round robin among the locality's healthy endpoints.

The balancing logic is the six lines of `Balancer` that call the policy (build it, update it, pick,
connect what it asks for); the hand-written version's picker class (smooth weighted round robin,
first healthy priority) took 25.

    python examples/custom_load_balancer.py
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from typing import Any

import grpc
from envoy.config.endpoint.v3 import endpoint_pb2

from xdsclient import CallbackWatcher, ResourceChanged, XdsClient
from xdsclient.lb import (
    ConnectivityState,
    EndpointKey,
    PickRequest,
    PriorityPolicy,
    child_policy_for,
    key_of,
)
from xdsclient.resources import ENDPOINT, RoundRobin
from xdsclient.testing import ControlPlane

METHOD = "/demo.Echo/WhoAmI"
READY = ConnectivityState.READY


async def start_backend(name: str) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server whose one method answers with its name."""

    async def who_am_i(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return name.encode()

    server = grpc.aio.server()
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(who_am_i)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("demo.Echo", {"WhoAmI": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


LAYOUT = (("zone-a", 3, 0, ("a", "b")), ("zone-b", 1, 0, ("c",)), ("zone-c", 1, 1, ("fallback",)))


def assignment(ports: dict[str, int], unhealthy: frozenset[str] = frozenset()) -> Any:
    """The cluster's endpoints, as the control plane publishes them."""
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name="backends")
    for zone, weight, priority, names in LAYOUT:
        group = message.endpoints.add(priority=priority)
        group.locality.zone = zone
        group.load_balancing_weight.value = weight
        for name in names:
            lb = group.lb_endpoints.add(
                health_status=2 if name in unhealthy else 1
            )  # UNHEALTHY / HEALTHY
            lb.endpoint.address.socket_address.address = "127.0.0.1"
            lb.endpoint.address.socket_address.port_value = ports[name]
    return message


class Balancer:
    """Follows the cluster's endpoints; gRPC's priority policy and weighted target pick."""

    def __init__(self) -> None:
        self.policy = PriorityPolicy(lambda: child_policy_for(RoundRobin()))
        self.rand, self.updated = random.Random(0), asyncio.Event()
        self._channels: dict[EndpointKey, grpc.aio.Channel] = {}

    def on_update(self, event: Any) -> None:
        if isinstance(event, ResourceChanged):
            self.policy.update(event.value.priorities, time.monotonic())
            self.updated.set()

    async def call(self) -> str:
        pick = self.policy.pick
        while (result := pick(PickRequest(), self.rand, time.monotonic())).endpoint is None:
            for endpoint in self.policy.wanted_connections():  # connect what the policy asks for
                await self._channel(key_of(endpoint)).channel_ready()
                self.policy.set_endpoint_state(key_of(endpoint), READY, time.monotonic())
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = self._channel(
            key_of(result.endpoint)
        ).unary_unary(METHOD)
        reply: bytes = await call(b"")
        return reply.decode()

    def _channel(self, key: EndpointKey) -> grpc.aio.Channel:
        if key not in self._channels:
            self._channels[key] = grpc.aio.insecure_channel(f"{key[0]}:{key[1]}")
        return self._channels[key]

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


PHASES: tuple[tuple[str, frozenset[str]], ...] = (
    ("all healthy", frozenset()),
    ("c unhealthy", frozenset("c")),
    ("priority 0 down", frozenset("abc")),
)


async def main(calls: int = 40) -> dict[str, collections.Counter[str]]:
    """Send ``calls`` calls in each phase; returns which backend answered how often."""
    backends = {name: await start_backend(name) for name in ("a", "b", "c", "fallback")}
    ports = {name: port for name, (_, port) in backends.items()}
    results: dict[str, collections.Counter[str]] = {}
    balancer = Balancer()
    try:
        async with (
            ControlPlane() as control_plane,
            XdsClient(control_plane.address, node_id="lb-example") as client,
        ):
            client.add_watcher(ENDPOINT, "backends", CallbackWatcher(balancer.on_update))
            for phase, unhealthy in PHASES:
                balancer.updated.clear()
                control_plane.set(assignment(ports, unhealthy))  # the control plane changes health
                await asyncio.wait_for(balancer.updated.wait(), 5)
                results[phase] = collections.Counter([await balancer.call() for _ in range(calls)])
                print(f"{phase}: {dict(sorted(results[phase].items()))}")
    finally:
        await balancer.close()
        for server, _ in backends.values():
            await server.stop(None)
    return results


if __name__ == "__main__":
    asyncio.run(main())
