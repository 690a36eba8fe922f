"""grpc.aio client interceptors on `XdsChannel`: they run in order around each call, the
details they pass on (metadata here) reach the backend, and one may answer a call itself."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import grpc

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane

from .echo import COUNT, SAY, EchoStub, Text, echo_backends, simple, until


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


class Awaiting(grpc.aio.UnaryUnaryClientInterceptor):
    """Awaits the call it makes, so a failed call's error leaves the interceptor; ``ended``
    is set as it leaves."""

    def __init__(self) -> None:
        self.ended = asyncio.Event()

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        try:
            call = await continuation(client_call_details, request)
            await call
            return call
        finally:
            self.ended.set()


async def _failed_status(channel: grpc.aio.Channel) -> tuple[Any, ...]:
    call = EchoStub(channel).Say(Text(value="fail:NOT_FOUND"), timeout=5)
    await until(call.done)
    status = (await call.code(), await call.details(), call.done(), call.cancelled())
    metadata = (await call.initial_metadata(), await call.trailing_metadata())
    return (*status, *(tuple(m) if m is not None else None for m in metadata))


async def test_a_call_whose_interceptor_raised_reports_its_status_as_grpc_aio_does(
    plane: ControlPlane, client: XdsClient
) -> None:
    """An interceptor lets the backend's NOT_FOUND escape: ``code()``, ``details()`` and the
    metadata give that status as they do on a grpc.aio channel to the same backend (they
    raised), and a call nobody looks at leaves no "Task exception was never retrieved"."""
    unretrieved: list[dict[str, Any]] = []
    awaiting = Awaiting()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    try:
        async with echo_backends("a") as (a,):
            plane.set_all(simple("svc", [("c", [a])]))
            async with (
                grpc.aio.insecure_channel(
                    f"127.0.0.1:{a.port}", interceptors=[Awaiting()]
                ) as plain,
                XdsChannel("xds:///svc", client=client, interceptors=[awaiting]) as channel,
            ):
                expected = await _failed_status(plain)
                assert expected[:2] == (grpc.StatusCode.NOT_FOUND, "a failed")
                assert await _failed_status(channel) == expected
                awaiting.ended.clear()
                EchoStub(channel).Say(Text(value="fail:NOT_FOUND"), timeout=5)
                await asyncio.wait_for(awaiting.ended.wait(), 5)
                await asyncio.sleep(0)  # the chain's task ends in the step after
                gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert not [c for c in unretrieved if "never retrieved" in str(c.get("message"))]
