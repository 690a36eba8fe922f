"""Priority failover and return over grpc.aio, balanced by `xdsclient.grpc.XdsChannel`.

Three grpc.aio backends run on 127.0.0.1: ``a`` and ``b`` in zone-a (priority 0) and
``fallback`` in zone-b (priority 1). The embedded control plane serves a listener, its routes,
an EDS cluster and that assignment; the channel follows the configuration, keeps a grpc.aio
channel per endpoint, reports their connectivity to its picker, and sends each call where the
picker says. (This example drove the deprecated `xdsclient.lb.aio.AioBalancer`; the channel
replaced it: ``XdsChannel(listener, client=client)`` and ``channel.unary_unary(method)``.)

Phases: all up (a and b share the calls, round robin); a and b stopped (their connections
fail, priority 1 takes over); a started again on its port (priority 0 is usable again and
serves). A call that fails while the channel notices a change is counted by its status code.

    python examples/grpc_aio_balancer.py
"""

from __future__ import annotations

import asyncio
import collections
import random

import grpc

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane, builders
from xdsclient.testing.builders import LocalitySpec

METHOD = "/demo.Echo/WhoAmI"


async def start_backend(name: str, port: int = 0) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server whose one method answers with its name."""

    async def who_am_i(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return name.encode()

    server = grpc.aio.server()
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(who_am_i)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("demo.Echo", {"WhoAmI": handler})]
    )
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, port


def publish(control_plane: ControlPlane, ports: dict[str, int]) -> None:
    """Listener -> routes -> cluster "backends" -> two priorities of endpoints."""
    control_plane.set(builders.api_listener("demo"))
    control_plane.set(builders.route_configuration("demo-routes", "backends"))
    control_plane.set(builders.cluster("backends"))
    localities = [
        LocalitySpec(endpoints=[("127.0.0.1", ports["a"]), ("127.0.0.1", ports["b"])]),
        LocalitySpec(endpoints=[("127.0.0.1", ports["fallback"])], zone="zone-b", priority=1),
    ]
    control_plane.set(builders.cluster_load_assignment("backends", localities))


async def send(channel: XdsChannel, calls: int) -> collections.Counter[str]:
    """Send ``calls`` calls; which backend answered how often (failures by status code)."""
    who_am_i = channel.unary_unary(METHOD)  # no serializers: requests and replies are bytes
    answers: collections.Counter[str] = collections.Counter()
    for _ in range(calls):
        try:
            answers[(await who_am_i(b"", timeout=5)).decode()] += 1
        except grpc.aio.AioRpcError as error:
            answers[error.code().name] += 1
    return answers


async def settle(channel: XdsChannel, expected: str, limit: float = 10.0) -> None:
    """Send calls until ``expected`` answers one (the channel has seen the change)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while loop.time() < deadline:
        if (await send(channel, 1)).get(expected):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{expected} never answered")


async def main(calls: int = 20) -> dict[str, collections.Counter[str]]:
    """Run the three phases; returns each phase's answers after the change was seen."""
    backends = {name: await start_backend(name) for name in ("a", "b", "fallback")}
    ports = {name: port for name, (_, port) in backends.items()}
    results: dict[str, collections.Counter[str]] = {}
    try:
        async with (
            ControlPlane() as control_plane,
            XdsClient(control_plane.address, node_id="failover-example") as client,
        ):
            publish(control_plane, ports)
            async with XdsChannel("xds:///demo", client=client, rng=random.Random(0)) as channel:
                for name in ("a", "b"):  # both connected: round robin alternates from here on
                    await settle(channel, name)
                results["all up"] = await send(channel, calls)
                for name in ("a", "b"):
                    await backends[name][0].stop(None)
                await settle(channel, "fallback")
                results["priority 0 down"] = await send(channel, calls)
                backends["a"] = await start_backend("a", ports["a"])
                await settle(channel, "a")
                results["a back"] = await send(channel, calls)
                for phase, answers in results.items():
                    print(f"{phase}: {dict(sorted(answers.items()))}")
    finally:
        for server, _ in backends.values():
            await server.stop(None)
    return results


if __name__ == "__main__":
    asyncio.run(main())
