"""grpc.aio client interceptors on `XdsChannel`: they run in order around each call, the
details they pass on (metadata here) reach the backend, and one may answer a call itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane

from .echo import COUNT, SAY, EchoStub, Text, echo_backends, simple


class Tagging(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds ``x-tag: <name>`` to every call and records the methods it saw."""

    def __init__(self, name: str, seen: list[str]) -> None:
        self.name = name
        self.seen = seen

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        metadata.add("x-tag", self.name)
        method: Any = details.method
        self.seen.append(f"{self.name}:{method.decode()}")
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        return await continuation(self._details(client_call_details), request)

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        return await continuation(self._details(client_call_details), request)


class Cached(grpc.aio.UnaryUnaryClientInterceptor):
    """Answers a request ``cached`` itself, without a call."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        if request.value == "cached":
            return Text(value="from cache")
        return await continuation(client_call_details, request)


async def test_interceptors_run_in_order_and_their_details_reach_the_backend(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Two tagging interceptors run first-to-last on unary and streaming calls, and the
    backend sees both tags; an interceptor that answers a call itself sends nothing."""
    seen: list[str] = []
    interceptors = [Tagging("one", seen), Tagging("two", seen), Cached()]
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client, interceptors=interceptors) as channel:
            stub = EchoStub(channel)
            call = stub.Say(Text(value="hi"), timeout=5)
            assert (await call).value == "a:hi"
            assert await call.code() is grpc.StatusCode.OK
            assert [m.value async for m in stub.Count(Text(value="2"), timeout=5)] == [
                "a:0",
                "a:1",
            ]
            assert (await stub.Say(Text(value="cached"), timeout=5)).value == "from cache"
    calls = [SAY, COUNT, SAY]
    assert seen == [f"{name}:{method}" for method in calls for name in ("one", "two")]
    assert [value for key, value in a.raw_metadata[0] if key == "x-tag"] == ["one", "two"]
    assert a.calls[SAY] == 1
