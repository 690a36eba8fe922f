"""A custom load balancer on EDS data: weighted round robin across localities and priorities,
with health filtering, sending real grpc.aio calls to local backends and following endpoint
changes.

Three grpc.aio backend servers (a, b, c) and a fallback run on 127.0.0.1; the embedded control
plane publishes their addresses in a ClusterLoadAssignment: zone-a (a, b) and zone-b (c) at
priority 0 weighted 3:1, zone-c (fallback) at priority 1. The balancer watches that assignment
and rebuilds its picker on every change:

- priority: the first priority with a healthy endpoint (gRPC's failover);
- locality: smooth weighted round robin by locality weight;
- endpoint: round robin over the healthy endpoints of the locality.

    python examples/custom_load_balancer.py
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import grpc
from envoy.config.endpoint.v3 import endpoint_pb2

from xdsclient import CallbackWatcher, ResourceChanged, XdsClient
from xdsclient.resources import ENDPOINT, ClusterLoadAssignmentView, Endpoint, LocalityEndpoints
from xdsclient.testing import ControlPlane

METHOD = "/demo.Echo/WhoAmI"


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


class WeightedRoundRobin:
    """Picks endpoints from one ClusterLoadAssignment view."""

    def __init__(self, view: ClusterLoadAssignmentView) -> None:
        self.localities: list[LocalityEndpoints] = []
        for group in view.priorities:  # the first priority with a healthy endpoint wins
            healthy = [loc for loc in group if any(e.healthy for e in loc.endpoints)]
            if healthy:
                self.localities = healthy
                break
        self._current = [0.0] * len(self.localities)
        self._cursor: dict[int, int] = collections.defaultdict(int)

    def pick(self) -> Endpoint:
        if not self.localities:
            raise RuntimeError("no healthy endpoint")
        # smooth weighted round robin over localities
        total = sum(loc.weight for loc in self.localities)
        for i, loc in enumerate(self.localities):
            self._current[i] += loc.weight
        chosen = max(range(len(self.localities)), key=lambda i: self._current[i])
        self._current[chosen] -= total
        healthy = [e for e in self.localities[chosen].endpoints if e.healthy]
        endpoint = healthy[self._cursor[chosen] % len(healthy)]
        self._cursor[chosen] += 1
        return endpoint


class Balancer:
    """Follows the cluster's endpoints and sends calls where the picker says."""

    def __init__(self) -> None:
        self.picker: WeightedRoundRobin | None = None
        self.updated = asyncio.Event()
        self._channels: dict[tuple[str, int], grpc.aio.Channel] = {}

    def on_update(self, event: Any) -> None:
        if isinstance(event, ResourceChanged):
            self.picker = WeightedRoundRobin(event.value)
            self.updated.set()

    async def call(self) -> str:
        assert self.picker is not None
        endpoint = self.picker.pick()
        key = (endpoint.address, endpoint.port)
        if key not in self._channels:
            self._channels[key] = grpc.aio.insecure_channel(f"{endpoint.address}:{endpoint.port}")
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = self._channels[key].unary_unary(
            METHOD
        )
        reply: bytes = await call(b"")
        return reply.decode()

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


PHASES: tuple[tuple[str, frozenset[str]], ...] = (
    ("all healthy", frozenset()),
    ("c unhealthy", frozenset("c")),
    ("priority 0 down", frozenset("abc")),
)


async def main(calls: int = 8) -> dict[str, collections.Counter[str]]:
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
