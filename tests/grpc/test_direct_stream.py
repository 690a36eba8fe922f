"""The direct server-streaming call (`DirectStream`): a stream whose route decides only its
cluster is grpc.aio's own call on the picked endpoint, read as grpc.aio's; however it ends, its
counts are released once (the connection's calls, circuit breaking, the policy's call end, load
reporting), and a stream whose route decides more still takes the full path."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.grpc._call import XdsCall
from xdsclient.grpc._direct_stream import DirectStream
from xdsclient.testing import ControlPlane, builders

from .echo import COUNT, EchoBackend, EchoStub, Text, until
from .test_custom_policies import ZonePolicy, made, policy_cluster, resources, typed_struct

__all__ = ["made"]  # the fixture, used here


class _CountingRandom(random.Random):
    """A seeded `random.Random` that counts the request hashes drawn from it."""

    draws = 0

    def getrandbits(self, k: int, /) -> int:
        self.draws += 1
        return super().getrandbits(k)


METADATA = (("x-user", "42"), ("x-request-id", "7f3c"), ("trace-bin", b"\x00\x01\x02"))


class StreamBackend(EchoBackend):
    """An echo backend whose ``Count`` also takes ``hold`` (one message, then waits until
    `release`) and ``fail:<code>`` (one message, then that status), and records each Count
    call's metadata in order."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.stream_metadata: list[list[tuple[str, str | bytes]]] = []

    async def _count(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.calls[COUNT] += 1
        self.stream_metadata.append([(k, v) for k, v in context.invocation_metadata() or ()])
        value = request.value
        if value == "hold" or value.startswith("fail:"):
            yield Text(value=f"{self.name}:0")
            if value == "hold":
                self.held.set()
                await self._release.wait()
            else:
                await context.abort(grpc.StatusCode[value[5:]], f"{self.name} failed")
            return
        for i in range(int(value)):
            yield Text(value=f"{self.name}:{i}")


@contextlib.asynccontextmanager
async def stream_backend() -> AsyncIterator[StreamBackend]:
    backend = StreamBackend("a")
    await backend.start()
    try:
        yield backend
    finally:
        backend.release()
        await backend.stop()


async def _read_all(call: Any, seen: list[str] | None = None, *, by_read: bool = False) -> str:
    """How the caller saw the stream end: its messages (after ``seen``, read by async
    iteration, or by ``read()``) and the error that ended it (a deadline's code only: C-core
    words its details as the deadline meets the stream)."""
    seen = [] if seen is None else seen
    try:
        if by_read:
            while (message := await call.read()) is not grpc.aio.EOF:
                seen.append(message.value)
        else:
            async for message in call:
                seen.append(message.value)
    except asyncio.CancelledError:
        return f"{seen} CancelledError"
    except grpc.aio.AioRpcError as error:
        if error.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"{seen} DEADLINE_EXCEEDED"
        return f"{seen} {error.code().name}: {error.details()}"
    except Exception as error:  # gRPC refused to send it
        return f"{seen} {type(error).__name__}: {error}"
    return f"{seen} OK"


async def _exhausted(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    call = stub.Count(Text(value="3"), timeout=5)
    return call, await _read_all(call)


async def _read_to_eof(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    call = stub.Count(Text(value="2"), timeout=5)
    return call, await _read_all(call, by_read=True)


async def _cancelled(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    call = stub.Count(Text(value="hold"), timeout=5)
    first = await call.read()
    await asyncio.wait_for(backend.held.wait(), 5)
    assert call.cancel()
    return call, await _read_all(call, [first.value], by_read=True)


async def _past_deadline(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    call = stub.Count(Text(value="hold"), timeout=0.5)
    return call, await _read_all(call)


async def _failed(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    call = stub.Count(Text(value="fail:INTERNAL"), timeout=5)
    return call, await _read_all(call)


async def _refused(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    call = stub.Count(Text(value="1"), timeout=5, metadata=[("x-bin", "text")])
    return call, await _read_all(call)


async def _invalid_metadata(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    call = stub.Count(Text(value="1"), timeout=5, metadata=[("X-Upper", "1")])
    return call, await _read_all(call)


async def _never_read(stub: EchoStub, backend: StreamBackend) -> tuple[Any, str]:
    """A stream nobody reads ends at its deadline (gRPC gives its status once its messages
    are read), with its done callbacks given the call."""
    call = stub.Count(Text(value="2"), timeout=0.5)
    ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    call.add_done_callback(ended.set_result)
    assert await asyncio.wait_for(ended, 5) is call
    return call, f"unread {(await call.code()).name}"


Scenario = Callable[[EchoStub, StreamBackend], Awaitable[tuple[Any, str]]]
#: each way a stream ends: how its caller sees it end, and whether the call ended OK (None:
#: gRPC refused to send it, so its pick is handed back with no outcome, as C-core never picks
#: such a call)
ENDS: dict[str, tuple[Scenario, str, bool | None]] = {
    "exhausted": (_exhausted, "['a:0', 'a:1', 'a:2'] OK", True),
    "read to EOF": (_read_to_eof, "['a:0', 'a:1'] OK", True),
    "cancelled": (_cancelled, "['a:0'] CancelledError", False),
    "deadline": (_past_deadline, "['a:0'] DEADLINE_EXCEEDED", False),
    "failed": (_failed, "['a:0'] INTERNAL: a failed", False),
    "refused": (
        _refused,
        """[] TypeError: Binary metadata key="x-bin" expected bytes, got <class 'str'>""",
        None,
    ),
    "invalid metadata": (_invalid_metadata, "[] INTERNAL: Invalid metadata", None),
    "never read": (_never_read, "unread DEADLINE_EXCEEDED", False),
}


def _zone_cluster(plane: ControlPlane, backend: StreamBackend) -> None:
    """Listener ``svc`` to cluster ``c`` (``test.ZonePolicy`` over zone ``z-a``, reporting
    load) over ``backend``."""
    cluster = policy_cluster("c", typed_struct("test.ZonePolicy", zone="z-a"), lrs=True)
    plane.set_all(resources(cluster, backend))


def _assert_released(channel: XdsChannel, backend: StreamBackend | None) -> None:
    """The channel forgot every call, and their counts are back to zero: the connection's
    calls (unless it closed: ``backend`` None), the cluster's circuit breaking, the calls in
    progress its load reporter counts (what it issued is taken by each report)."""
    core = channel._core
    assert not channel._calls
    if backend is not None:
        assert core.connections.connect(("127.0.0.1", backend.port)).calls == 0
    assert core.picker._leaves["c"].counter.in_flight == 0
    load = core.load_of("c")
    assert load is not None
    assert [counts.in_progress for counts in load._localities.values()] in ([], [0])


@pytest.mark.parametrize("end", list(ENDS))
async def test_a_direct_stream_ends_as_grpc_aios_and_releases_its_counts(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy], end: str
) -> None:
    """A stream sent directly (grpc.aio's own call) ends for its caller as the same stream
    through a plain grpc.aio channel does, and once it ended the policy heard its end once
    with its outcome (none for a stream gRPC refused to send), and the connection, circuit
    breaking and load reporting counts are released."""
    scenario, expected, ok = ENDS[end]
    async with stream_backend() as a:
        _zone_cluster(plane, a)
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{a.port}") as plain,
            XdsChannel("xds:///svc", client=client) as channel,
        ):
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="warm"), timeout=5)).value == "a:warm"
            a.held.clear()
            _, through_plain = await scenario(EchoStub(plain), a)
            a.held.clear()
            call, seen = await scenario(stub, a)
            assert isinstance(call, DirectStream)
            assert (seen, through_plain) == (expected, expected)
            if ok is not None:
                await until(lambda: len(made[0].ends) == 2)
            await until(lambda: not channel._calls)
            assert [e.ok for _, e in made[0].ends] == ([True] if ok is None else [True, ok])
            _assert_released(channel, a)
            assert call.done()


async def test_closing_the_channel_ends_a_direct_stream_as_channel_closed_and_releases_it(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy]
) -> None:
    """`close` ends a direct stream in flight: its reader gets CANCELLED ``Channel closed!``
    (as from a planned call), its code and details say so, and its counts are released."""
    async with stream_backend() as a:
        _zone_cluster(plane, a)
        channel = XdsChannel("xds:///svc", client=client)
        stub = EchoStub(channel)
        assert (await stub.Say(Text(value="warm"), timeout=5)).value == "a:warm"
        call = stub.Count(Text(value="hold"), timeout=5)
        assert isinstance(call, DirectStream)
        first = await call.read()
        await asyncio.wait_for(a.held.wait(), 5)
        reading = asyncio.ensure_future(_read_all(call, [first.value], by_read=True))
        await asyncio.wait_for(channel.close(), 5)
        assert await asyncio.wait_for(reading, 5) == "['a:0'] CANCELLED: Channel closed!"
        assert await call.code() is grpc.StatusCode.CANCELLED
        assert await call.details() == "Channel closed!"
        assert not call.cancelled()
        assert [e.ok for _, e in made[0].ends] == [True, False]
        _assert_released(channel, None)


async def test_a_direct_streams_metadata_reaches_the_backend_as_through_grpc_aio(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy]
) -> None:
    """The metadata of a direct stream (text and ``-bin`` values, and gzip compression's)
    reaches the backend key by key, in order, as the same stream's through a plain grpc.aio
    channel; its initial and trailing metadata, code and details read as grpc.aio's."""
    async with stream_backend() as a:
        _zone_cluster(plane, a)
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{a.port}") as plain,
            XdsChannel("xds:///svc", client=client) as channel,
        ):
            assert (await EchoStub(channel).Say(Text(value="warm"), timeout=5)).value == "a:warm"
            seen = []
            for each in (plain, channel):
                call = EchoStub(each).Count(
                    Text(value="1"), timeout=5, metadata=METADATA, compression=grpc.Compression.Gzip
                )
                await call.wait_for_connection()
                assert 0 < (call.time_remaining() or 0) <= 5
                assert [m.value async for m in call] == ["a:0"]
                seen.append(
                    (
                        await call.code(),
                        await call.details(),
                        type(await call.initial_metadata()),
                        type(await call.trailing_metadata()),
                        call.done(),
                        call.cancelled(),
                    )
                )
            assert isinstance(call, DirectStream)
            assert seen[1] == seen[0]
            plain_metadata, ours = a.stream_metadata
            assert ours == plain_metadata
            assert [k for k, _ in ours if k in dict(METADATA)] == [k for k, _ in METADATA]


def _routes_with(change: Callable[[Any], None]) -> Any:
    """``svc-routes``, every path to ``c``, its virtual host changed by ``change``."""
    routes = builders.route_configuration("svc-routes", "c")
    change(routes.virtual_hosts[0])
    return routes


def _retried(vhost: Any) -> None:
    """The route retries UNAVAILABLE."""
    vhost.routes[0].route.retry_policy.retry_on = "unavailable"
    vhost.routes[0].route.retry_policy.num_retries.value = 2


def _header_tested(vhost: Any) -> None:
    """A route testing ``x-user`` comes first, to the same cluster."""
    catch_all = type(vhost.routes[0])()
    catch_all.CopyFrom(vhost.routes[0])
    del vhost.routes[:]
    tested = vhost.routes.add()
    tested.CopyFrom(catch_all)
    tested.match.headers.add(name="x-user").present_match = True
    vhost.routes.append(catch_all)


@pytest.mark.parametrize(
    ("change", "metadata", "direct"),
    [
        (_retried, (), False),
        (_header_tested, METADATA, False),
        (_header_tested, (), True),
    ],
    ids=["retry policy", "header-tested route, with metadata", "header-tested route, none"],
)
async def test_a_stream_whose_route_decides_more_than_its_cluster_takes_the_full_path(
    plane: ControlPlane,
    client: XdsClient,
    made: list[ZonePolicy],
    change: Callable[[Any], None],
    metadata: Any,
    direct: bool,
) -> None:
    """A stream whose route has a retry policy, or tests a header the call's metadata could
    match, is a planned `XdsCall`; a call without metadata on a header-tested route is sent
    directly; each is answered and releases its counts."""
    async with stream_backend() as a:
        cluster = policy_cluster("c", typed_struct("test.ZonePolicy", zone="z-a"), lrs=True)
        listener, _, *rest = resources(cluster, a)
        plane.set_all([listener, _routes_with(change), *rest])
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="w"), timeout=5, metadata=[("x-user", "1")])).value
            call = stub.Count(Text(value="2"), timeout=5, metadata=metadata)
            assert isinstance(call, DirectStream if direct else XdsCall)
            assert [m.value async for m in call] == ["a:0", "a:1"]
            await until(lambda: not channel._calls)
            _assert_released(channel, a)


async def test_a_stream_made_while_its_pick_queues_waits_for_it_and_is_answered_once(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy]
) -> None:
    """A stream made while its endpoint is down (the policy queues the pick) is a planned
    `XdsCall` given that pick, and its draw: once the backend is back it is answered on its
    one attempt with no second draw, the policy hears one end for it, and its counts are
    released."""
    rng = _CountingRandom(7)
    async with stream_backend() as a:
        _zone_cluster(plane, a)
        async with XdsChannel("xds:///svc", client=client, rng=rng) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="warm"), timeout=5)).value == "a:warm"
            await a.stop(keep_port=True)
            await until(lambda: channel.get_state() is not grpc.ChannelConnectivity.READY)
            drawn = rng.draws
            call = stub.Count(Text(value="2"), timeout=10)
            assert isinstance(call, XdsCall)
            await a.start()
            assert [m.value async for m in call] == ["a:0", "a:1"]
            assert rng.draws == drawn + 1
            assert a.calls[COUNT] == 1
            await until(lambda: not channel._calls)
            assert [e.ok for _, e in made[0].ends] == [True, True]
            _assert_released(channel, a)
