"""How a planned streaming call (`XdsCall`: here its route has a retry policy or a max stream
duration) ends when its caller does not read it: at its deadline, as grpc.aio's own stream
does (gRPC gives a stream's messages and status only as they are read, and ends it at its
deadline whatever it holds unread), when its caller cancels it, and when the server fails it
unread; each compared with the same stream through a plain grpc.aio channel to the same
backend, and each releasing its counts once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.grpc._call import XdsCall
from xdsclient.testing import ControlPlane

from .echo import EchoStub, Text, until
from .test_custom_policies import ZonePolicy, made, policy_cluster, resources, typed_struct
from .test_direct_stream import (
    StreamBackend,
    _assert_released,
    _retried,
    _routes_with,
    stream_backend,
)

__all__ = ["made"]  # the fixture, used here

#: the deadline every stream here meets (the caller's, or the route's max stream duration)
DEADLINE = 0.3


def _max_duration(vhost: Any) -> None:
    """The route's max stream duration is `DEADLINE`."""
    duration = vhost.routes[0].route.max_stream_duration.max_stream_duration
    duration.FromMilliseconds(int(DEADLINE * 1000))


Scenario = Callable[[EchoStub, StreamBackend, float], Awaitable[tuple[Any, str]]]


async def _ended(call: Any) -> None:
    """Wait (bounded) until ``call``'s done callbacks are given it."""
    ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    call.add_done_callback(lambda done: ended.done() or ended.set_result(done))
    assert await asyncio.wait_for(ended, 5) is call


async def _seen(call: Any, seen: list[str]) -> str:
    """How a reader sees ``call`` once it reads it (after ``seen``): its messages, the end,
    and the call's code and details."""
    try:
        while (message := await call.read()) is not grpc.aio.EOF:
            seen.append(message.value)
        end = "OK"
    except asyncio.CancelledError:
        end = "CancelledError"
    except grpc.aio.AioRpcError as error:
        end = f"{error.code().name}: {error.details()}"
    return f"{seen} {end}; {(await call.code()).name}: {await call.details()}"


def _unread(value: str) -> Scenario:
    """The scenario of a ``Count`` stream of ``value`` nobody reads until it has ended."""

    async def scenario(stub: EchoStub, backend: StreamBackend, timeout: float) -> tuple[Any, str]:
        call = stub.Count(Text(value=value), timeout=timeout)
        await _ended(call)
        return call, await _seen(call, [])

    return scenario


async def _read_once(stub: EchoStub, backend: StreamBackend, timeout: float) -> tuple[Any, str]:
    call = stub.Count(Text(value="3"), timeout=timeout)
    first = await call.read()
    await _ended(call)
    return call, await _seen(call, [first.value])


async def _cancelled_unread(
    stub: EchoStub, backend: StreamBackend, timeout: float
) -> tuple[Any, str]:
    call = stub.Count(Text(value="hold"), timeout=timeout)
    await asyncio.wait_for(backend.held.wait(), 5)
    if isinstance(call, XdsCall):  # its first message came, unread (grpc.aio's holds it)
        await until(lambda: call._responses is not None and call._responses.qsize() == 1)
    assert call.cancel()
    await _ended(call)
    return call, await _seen(call, [])


async def _chat_never_read(
    stub: EchoStub, backend: StreamBackend, timeout: float
) -> tuple[Any, str]:
    call = stub.Chat(timeout=timeout)
    await call.write(Text(value="x"))
    await _ended(call)
    return call, await _seen(call, [])


async def _collect_never_awaited(
    stub: EchoStub, backend: StreamBackend, timeout: float
) -> tuple[Any, str]:
    call = stub.Collect(timeout=timeout)
    await call.write(Text(value="x"))
    await _ended(call)
    return call, f"{(await call.code()).name}: {await call.details()}"


#: each unread end: the scenario, the code its caller sees (the details are grpc.aio's)
ENDS: dict[str, tuple[Scenario, str]] = {
    "never read": (_unread("2"), "DEADLINE_EXCEEDED"),
    "last message unread": (_unread("1"), "DEADLINE_EXCEEDED"),
    "read once, then not": (_read_once, "DEADLINE_EXCEEDED"),
    "held by the server, unread": (_unread("hold"), "DEADLINE_EXCEEDED"),
    "failed by the server, unread": (_unread("fail:INTERNAL"), "DEADLINE_EXCEEDED"),
    "cancelled unread": (_cancelled_unread, "CancelledError"),
    "bidi never read": (_chat_never_read, "DEADLINE_EXCEEDED"),
    "client streaming never awaited": (_collect_never_awaited, "DEADLINE_EXCEEDED"),
}
#: how the planned path is forced, and the caller's timeout then
ROUTES: dict[str, tuple[Callable[[Any], None], float]] = {
    "retry policy": (_retried, DEADLINE),
    "max stream duration": (_max_duration, 5.0),
}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("end", list(ENDS))
async def test_an_unread_planned_stream_ends_as_grpc_aios_and_releases_its_counts(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy], end: str, route: str
) -> None:
    """A planned stream nobody reads ends at its deadline (the caller's, or the route's max
    stream duration), or as its caller cancels it, with the code and details, and the
    messages a later reader sees, of the same stream through a plain grpc.aio channel; the
    policy hears its end once, and its connection, circuit breaking and load reporting
    counts are released."""
    scenario, code = ENDS[end]
    change, timeout = ROUTES[route]
    async with stream_backend() as a:
        cluster = policy_cluster("c", typed_struct("test.ZonePolicy", zone="z-a"), lrs=True)
        listener, _, *rest = resources(cluster, a)
        plane.set_all([listener, _routes_with(change), *rest])
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{a.port}") as plain,
            XdsChannel("xds:///svc", client=client) as channel,
        ):
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="warm"), timeout=5)).value == "a:warm"
            _, through_plain = await scenario(EchoStub(plain), a, DEADLINE)
            a.held.clear()
            call, seen = await scenario(stub, a, timeout)
            assert isinstance(call, XdsCall)
            assert code in through_plain
            assert seen == through_plain
            await until(lambda: len(made[0].ends) == 2)
            assert [e.ok for _, e in made[0].ends] == [True, False]
            await until(lambda: not channel._calls)
            _assert_released(channel, a)


async def test_closing_the_channel_drops_an_unread_planned_streams_messages_and_releases_it(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy]
) -> None:
    """`close` ends a planned stream holding a message its caller has not read: a later
    reader gets no message (a plain grpc.aio channel's close drops it too) but CANCELLED
    ``Channel closed!``, as from every call the channel's close ends, and its counts are
    released."""
    async with stream_backend() as a:
        cluster = policy_cluster("c", typed_struct("test.ZonePolicy", zone="z-a"), lrs=True)
        listener, _, *rest = resources(cluster, a)
        plane.set_all([listener, _routes_with(_retried), *rest])
        channel = XdsChannel("xds:///svc", client=client)
        stub = EchoStub(channel)
        assert (await stub.Say(Text(value="warm"), timeout=5)).value == "a:warm"
        call = stub.Count(Text(value="hold"), timeout=5)
        assert isinstance(call, XdsCall)
        await asyncio.wait_for(a.held.wait(), 5)
        await until(lambda: call._responses is not None and call._responses.qsize() == 1)
        await asyncio.wait_for(channel.close(), 5)
        seen = await asyncio.wait_for(_seen(call, []), 5)
        assert seen == "[] CANCELLED: Channel closed!; CANCELLED: Channel closed!"
        assert [e.ok for _, e in made[0].ends] == [True, False]
        _assert_released(channel, None)
