"""`XdsChannel` as grpc.aio's channel: generated-stub style calls of the four kinds over the
test control plane and real backends, with metadata, and the channel's lifecycle."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import tempfile
from typing import Any

import grpc
import pytest

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.grpc._direct import DirectCall
from xdsclient.testing import ControlPlane, bootstrap, builders

from .echo import CHAT, COLLECT, COUNT, SAY, EchoStub, Text, echo_backends, simple, until


async def test_generated_stub_calls_of_every_kind_reach_the_backend(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Unary, server-streaming, client-streaming and bidi calls of a generated-style stub go
    to the cluster's backend, which sees the caller's metadata."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            assert isinstance(channel, grpc.aio.Channel)
            stub = EchoStub(channel)
            reply = await stub.Say(Text(value="hi"), timeout=5, metadata=[("x-user", "42")])
            assert reply.value == "a:hi"
            assert a.metadata[-1]["x-user"] == "42"
            streamed = [m.value async for m in stub.Count(Text(value="3"), timeout=5)]
            assert streamed == ["a:0", "a:1", "a:2"]
            collected = await stub.Collect(iter([Text(value="x"), Text(value="y")]), timeout=5)
            assert collected.value == "a:x,y"
            chat = stub.Chat(iter([Text(value="p"), Text(value="q")]), timeout=5)
            assert [m.value async for m in chat] == ["a:p", "a:q"]
            assert dict(a.calls) == {SAY: 1, COUNT: 1, COLLECT: 1, CHAT: 1}
            assert await chat.code() is grpc.StatusCode.OK


async def test_a_registered_methods_calls_are_registered_calls_on_the_endpoints_channel(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Calls of every kind from a stub built with ``_registered_method=True`` (as generated
    code builds it) reach the backend as registered calls on the endpoint's grpc.aio channel
    (C-core registers the method once), and a multi-callable built without it stays
    unregistered, as grpc.aio's own channel does."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="hi"), timeout=5)).value == "a:hi"
            assert [m.value async for m in stub.Count(Text(value="1"), timeout=5)] == ["a:0"]
            assert (await stub.Collect(iter([Text(value="x")]), timeout=5)).value == "a:x"
            assert [m.value async for m in stub.Chat(iter([Text(value="p")]), timeout=5)] == ["a:p"]
            assert dict(a.calls) == {SAY: 1, COUNT: 1, COLLECT: 1, CHAT: 1}
            made = channel._core._multicallables  # the endpoint channel's multi-callables
            assert len(made) == 4
            assert all(m._registered_call_handle != 0 for m in made.values())
            made.clear()
            plain = channel.unary_unary(
                SAY,
                request_serializer=Text.SerializeToString,
                response_deserializer=Text.FromString,
            )
            assert (await plain(Text(value="plain"), timeout=5)).value == "a:plain"
            assert [m._registered_call_handle for m in made.values()] == [0]


async def test_the_channel_reports_ready_and_shutdown(
    plane: ControlPlane, client: XdsClient
) -> None:
    """IDLE before it starts, READY once a backend is connected (`channel_ready`), SHUTDOWN
    after `close`, and a call after close is refused as grpc.aio refuses it."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        channel = XdsChannel("xds:///svc", client=client)
        assert channel.get_state() is grpc.ChannelConnectivity.IDLE
        await asyncio.wait_for(channel.channel_ready(), 10)
        assert channel.get_state() is grpc.ChannelConnectivity.READY
        await channel.close()
        assert channel.get_state() is grpc.ChannelConnectivity.SHUTDOWN
        with pytest.raises(grpc.aio.UsageError):
            await EchoStub(channel).Say(Text(value="late"), timeout=5)
        assert not client.closed  # a shared client stays open


async def test_without_a_client_the_channel_reads_the_bootstrap_and_closes_its_client(
    plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No client: the channel makes one from ``GRPC_XDS_BOOTSTRAP`` as grpcio does, and
    closing the channel closes it."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "bootstrap.json")
            with open(path, "w") as file:
                json.dump(bootstrap([plane], node_id="from-env"), file)
            monkeypatch.setenv("GRPC_XDS_BOOTSTRAP", path)
            async with XdsChannel("xds:///svc") as channel:
                reply = await EchoStub(channel).Say(Text(value="env"), timeout=5)
                assert reply.value == "a:env"
                assert channel.client.config.node.id == "from-env"
            assert channel.client.closed


async def test_cancelling_a_call_cancels_it_at_the_caller(
    plane: ControlPlane, client: XdsClient
) -> None:
    """``call.cancel()`` ends a call in flight: the caller sees CancelledError, as grpc.aio's
    callers do, and its code is CANCELLED."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            call = EchoStub(channel).Say(Text(value="hold"), timeout=10)
            await asyncio.wait_for(a.held.wait(), 5)
            assert call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert await call.code() is grpc.StatusCode.CANCELLED


async def test_a_write_to_a_call_that_failed_before_any_attempt_raises_the_calls_error(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A client-streaming call with no route for its method fails before an attempt is sent:
    ``write`` and ``done_writing`` raise the call's `AioRpcError`, as on a grpc.aio channel
    (they raised an AttributeError)."""
    async with echo_backends("a") as (a,):
        resources = simple("svc", [("c", [a])])
        resources[1] = builders.route_configuration("svc-routes", {"/elsewhere/": "c"})
        plane.set_all(resources)
        async with XdsChannel("xds:///svc", client=client) as channel:
            call = EchoStub(channel).Collect(timeout=5)
            for step in (lambda: call.write(Text(value="m")), call.done_writing):
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await step()
                assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
                assert failed.value.details() == "No matching route found in xDS route config"
            assert await call.code() is grpc.StatusCode.UNAVAILABLE
    assert not a.calls


async def test_a_streaming_call_made_without_an_iterator_takes_writes(
    plane: ControlPlane, client: XdsClient
) -> None:
    """``write`` and ``done_writing`` on a client-streaming call made without a request
    iterator send the messages, as on a grpc.aio channel; the call's metadata and code read
    as grpc.aio's."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            call = EchoStub(channel).Collect(timeout=5)
            await call.write(Text(value="m"))
            await call.write(Text(value="n"))
            await call.done_writing()
            assert (await call).value == "a:m,n"
            assert await call.code() is grpc.StatusCode.OK
            assert await call.details() == ""
            assert isinstance(await call.trailing_metadata(), grpc.aio.Metadata)
            assert call.done()
            assert not call.cancelled()


async def _held_by_its_awaiter(channel: grpc.aio.Channel, made: list[Any]) -> tuple[str, int, bool]:
    """Make a held call and await it at once (on this task, as ``await stub.Say(...)`` does):
    how it ended, the task's cancellation count after, and whether the task is cancelling."""
    call = EchoStub(channel).Say(Text(value="hold"), timeout=10)
    made.append(call)
    try:
        await call
    except asyncio.CancelledError:
        ended = "CancelledError"
    except grpc.aio.AioRpcError as error:
        ended = f"{error.code().name}: {error.details()}"
    else:
        ended = "answered"
    task = asyncio.current_task()
    assert task is not None
    return ended, task.cancelling(), task.cancelled()


async def test_cancelling_a_call_its_awaiter_is_running_ends_that_call_only(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A call awaited as it was made and then cancelled: its awaiter sees CancelledError and
    its task is not left cancelling, as with grpc.aio's call to the same backend; the call's
    code is CANCELLED."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{a.port}") as plain,
            XdsChannel("xds:///svc", client=client) as channel,
        ):
            results = []
            for each in (plain, channel):
                a.held.clear()
                made: list[Any] = []
                awaiter = asyncio.ensure_future(_held_by_its_awaiter(each, made))
                await asyncio.wait_for(a.held.wait(), 5)
                assert made[0].cancel()
                results.append(await asyncio.wait_for(awaiter, 5))
                assert await made[0].code() is grpc.StatusCode.CANCELLED
                assert made[0].cancelled()
            assert results[1] == results[0] == ("CancelledError", 0, False)


async def test_closing_the_channel_ends_a_call_its_awaiter_is_running_as_channel_closed(
    plane: ControlPlane, client: XdsClient
) -> None:
    """`close` ends a call in flight that runs on its awaiter's task with CANCELLED ``Channel
    closed!``; the awaiter's task goes on, not cancelled."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        channel = XdsChannel("xds:///svc", client=client)
        made: list[Any] = []
        awaiter = asyncio.ensure_future(_held_by_its_awaiter(channel, made))
        await asyncio.wait_for(a.held.wait(), 5)
        await asyncio.wait_for(channel.close(), 5)
        assert await asyncio.wait_for(awaiter, 5) == ("CANCELLED: Channel closed!", 0, False)
        assert made[0].done()


async def test_a_unary_call_nobody_awaits_is_still_sent(
    plane: ControlPlane, client: XdsClient, unary_path: str
) -> None:
    """A unary call made and never awaited goes out as grpc.aio's does, and ends: its done
    callbacks run and its code is OK."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            await channel.channel_ready()
            ended = asyncio.Event()
            call = EchoStub(channel).Say(Text(value="unawaited"), timeout=5)
            assert isinstance(call, DirectCall) is (unary_path == "direct")
            call.add_done_callback(lambda done: ended.set() if done is call else None)
            await asyncio.wait_for(ended.wait(), 5)
            assert a.calls[SAY] == 1
            assert await call.code() is grpc.StatusCode.OK
            assert await call == Text(value="a:unawaited")


async def test_connectivity_reports_of_many_endpoints_share_one_pass_over_them(
    plane: ControlPlane, client: XdsClient
) -> None:
    """An assignment of 400 endpoints (one backend, the others refusing on other loopback
    addresses): the first call is answered, every endpoint gets its connection (round robin
    connects all), and the picker's wanted endpoints are walked far fewer times than there
    are connectivity reports (each report walked all 400 before: quadratic in endpoints)."""
    async with echo_backends("a") as (a,):
        refusing = [(f"127.0.{1 + i // 250}.{1 + i % 250}", a.port) for i in range(399)]
        resources = simple("svc", [("c", [a])])
        resources[-1] = builders.cluster_load_assignment("c", [("127.0.0.1", a.port), *refusing])
        plane.set_all(resources)
        async with XdsChannel("xds:///svc", client=client) as channel:
            picker = channel._core.picker
            counts = {"walks": 0, "reports": 0}
            wanted, report = picker.wanted_connections, picker.set_endpoint_state

            def walk() -> Any:
                counts["walks"] += 1
                return wanted()

            def reported(*args: Any) -> None:
                counts["reports"] += 1
                report(*args)

            picker.wanted_connections = walk  # type: ignore[method-assign]
            picker.set_endpoint_state = reported  # type: ignore[method-assign,assignment]
            reply = await EchoStub(channel).Say(Text(value="first"), timeout=10)
            assert reply.value == "a:first"
            await until(lambda: len(channel._core.connections) == 400, 10)
            await until(lambda: counts["reports"] >= 800, 10)  # IDLE/CONNECTING, then failed
        assert counts["walks"] * 4 < counts["reports"], counts


async def test_a_unary_call_grpc_refuses_to_send_fails_and_releases_its_counts(
    plane: ControlPlane, client: XdsClient, unary_path: str
) -> None:
    """A direct unary call whose metadata gRPC refuses (an upper-case key) fails as through a
    grpc.aio channel, and still ends: the channel forgets it, the connection's count of calls
    and the cluster's circuit breaking count are back to zero, and later calls go through."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="x"), timeout=5)).value == "a:x"
            for _ in range(3):
                call = stub.Say(Text(value="y"), timeout=5, metadata=[("X-Upper", "1")])
                with pytest.raises(Exception, match=r"execute_batch") as refused:  # grpc.aio's
                    await call
                assert not isinstance(refused.value, asyncio.CancelledError)
            await until(lambda: not channel._calls)
            connection = channel._core.connections.connect(("127.0.0.1", a.port))
            assert connection.calls == 0
            leaf = channel._core.picker._leaves["c"]
            assert leaf.counter.in_flight == 0
            assert (await stub.Say(Text(value="z"), timeout=5)).value == "a:z"
            assert dict(a.calls) == {SAY: 2}


def _count_ends(channel: XdsChannel) -> list[Any]:
    """The picks the channel's picker is told ended (with an outcome or handed back), in order."""
    picker: Any = channel._core.picker  # its hooks wrapped below
    ends: list[Any] = []
    finish, abandon = picker.call_finished, picker.call_abandoned

    def call_finished(picked: Any, *args: Any, **kwargs: Any) -> None:
        ends.append(picked)
        finish(picked, *args, **kwargs)

    def call_abandoned(picked: Any) -> None:
        ends.append(picked)
        abandon(picked)

    picker.call_finished = call_finished
    picker.call_abandoned = call_abandoned
    return ends


@pytest.mark.parametrize("refused", [True, False], ids=["refused", "sendable"])
@pytest.mark.parametrize("end", ["unawaited", "cancelled-at-once", "channel-closed-at-once"])
async def test_a_direct_unary_call_nobody_awaits_releases_its_counts_exactly_once(
    plane: ControlPlane, client: XdsClient, refused: bool, end: str
) -> None:
    """A direct unary call nobody awaits, whose metadata gRPC refuses or not, left to run,
    cancelled or closed with the channel before its first turn of the loop: its pick is ended
    once, the channel forgets it, the connection's and circuit breaking's counts are back to
    zero, and neither the channel's close nor the call's garbage ends it again."""
    metadata = [("X-Upper", "1")] if refused else [("x-lower", "1")]
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        channel = XdsChannel("xds:///svc", client=client)
        async with channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="x"), timeout=5)).value == "a:x"
            ends = _count_ends(channel)
            connection = channel._core.connections.connect(("127.0.0.1", a.port))
            leaf = channel._core.picker._leaves["c"]
            call = stub.Say(Text(value="y"), timeout=5, metadata=metadata)
            assert isinstance(call, DirectCall)  # picked and sent as it was made
            picked = call._picked
            if end == "cancelled-at-once":
                assert call.cancel()
            elif end == "channel-closed-at-once":
                await channel.close()
            ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            call.add_done_callback(ended.set_result)
            assert await asyncio.wait_for(ended, 5) is call
            await until(lambda: not channel._calls)
            del call
            gc.collect()
        gc.collect()
        assert len(ends) == 1
        assert ends[0] is picked
        assert connection.calls == 0
        assert leaf.counter.in_flight == 0


@pytest.mark.parametrize("failing", ["multicallable", "load_of"])
async def test_a_unary_call_whose_send_raises_after_its_pick_hands_the_pick_back(
    plane: ControlPlane, client: XdsClient, unary_path: str, failing: str
) -> None:
    """When making the endpoint's grpc.aio multi-callable or finding the cluster's load
    reporter raises once a unary call has its pick, the call fails with that error and every
    pick it made ends: circuit breaking's and the connection's counts are back to zero, the
    channel forgets the call, and later calls go through."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="x"), timeout=5)).value == "a:x"
            core = channel._core
            connection = core.connections.connect(("127.0.0.1", a.port))
            leaf = core.picker._leaves["c"]
            ends = _count_ends(channel)
            working = getattr(core, failing)

            def broken(*args: Any) -> Any:
                raise RuntimeError(f"{failing} is broken")

            setattr(core, failing, broken)
            fresh = channel.unary_unary(  # a multi-callable of its own: nothing made yet
                SAY,
                request_serializer=Text.SerializeToString,
                response_deserializer=Text.FromString,
            )
            with pytest.raises(RuntimeError, match="is broken"):
                await fresh(Text(value="y"), timeout=5)
            await until(lambda: not channel._calls)
            assert leaf.counter.in_flight == 0
            assert connection.calls == 0
            assert ends  # picked, then handed back
            setattr(core, failing, working)
            assert (await fresh(Text(value="z"), timeout=5)).value == "a:z"
            assert dict(a.calls) == {SAY: 2}


async def test_a_unary_call_nobody_awaits_ends_with_its_callbacks_and_counts_released(
    plane: ControlPlane, client: XdsClient, unary_path: str
) -> None:
    """A unary call made once the channel is serving and never awaited reaches the backend;
    when it ends its done callback gets the call itself, the channel forgets it and the
    connection's count of calls is back to zero."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="x"), timeout=5)).value == "a:x"
            ended: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            call = stub.Say(Text(value="y"), timeout=5)
            call.add_done_callback(ended.set_result)
            assert await asyncio.wait_for(ended, 5) is call
            assert call.done()
            assert not call.cancelled()
            assert await call.code() is grpc.StatusCode.OK
            assert dict(a.calls) == {SAY: 2}
            assert not channel._calls
            connection = channel._core.connections.connect(("127.0.0.1", a.port))
            assert connection.calls == 0
