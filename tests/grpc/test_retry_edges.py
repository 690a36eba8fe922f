"""The edges of `XdsChannel`'s retries, as C-core's retry filter has them: a unary call is
committed by the server's response headers, ``grpc.enable_retries`` = 0 turns retries off for
every call kind, and a request-streaming call its route does not retry keeps none of its
messages (grpc.aio's call takes them as a plain channel's does), against a real backend that
fails the first attempts of a call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.grpc._requests import retries_enabled
from xdsclient.testing import ControlPlane

from .echo import EchoStub, Text
from .retry_echo import HEADERS, retry_backend, retrying

TARGET = "xds:///streams"


async def _code(channel: XdsChannel, method: str, metadata: list[tuple[str, str]]) -> Any:
    """Call ``method`` with one message "a" and return its status code."""
    stub: Any = EchoStub(channel)
    if method == "Say":
        call = stub.Say(Text(value="a"), timeout=5, metadata=metadata)
    else:
        call = getattr(stub, method)(iter([Text(value="a")]), timeout=5, metadata=metadata)
    if method == "Chat":  # its replies are read before it ends
        with contextlib.suppress(grpc.aio.AioRpcError):
            _ = [message async for message in call]
    return await call.code()


async def test_a_unary_call_committed_by_the_servers_headers_is_not_retried(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A unary attempt whose server sent response headers with metadata, then failed
    UNAVAILABLE, is the call's last (C-core commits a call on its response headers); the same
    failure without headers is retried and answered."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            stub = EchoStub(channel)
            call = stub.Say(
                Text(value="a"),
                timeout=5,
                metadata=[("x-call", "h"), ("x-fail", "1"), ("x-headers", "1")],
            )
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await call
            assert tuple(await call.initial_metadata()) == HEADERS
            reply = await stub.Say(
                Text(value="b"), timeout=5, metadata=[("x-call", "plain"), ("x-fail", "1")]
            )
    assert (failed.value.code(), failed.value.details()) == (
        grpc.StatusCode.UNAVAILABLE,
        "attempt 1 failed",
    )
    assert reply.value == "b"
    assert backend.counts() == {"h": 1, "plain": 2}


@pytest.mark.parametrize("method", ["Say", "Collect", "Chat"])
async def test_enable_retries_0_turns_retries_off_for_every_call_kind(
    plane: ControlPlane, client: XdsClient, method: str
) -> None:
    """With ``grpc.enable_retries`` 0 in the channel options a call whose first attempt fails
    UNAVAILABLE (a code its route retries) ends with it after one attempt; with 1 the same
    call is retried and answered."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        off = [("grpc.enable_retries", 0)]
        async with XdsChannel(TARGET, client=client, channel_options=off) as channel:
            code_off = await _code(channel, method, [("x-call", "off"), ("x-fail", "1")])
        on = [("grpc.enable_retries", 1)]
        async with XdsChannel(TARGET, client=client, channel_options=on) as channel:
            code_on = await _code(channel, method, [("x-call", "on"), ("x-fail", "1")])
    assert (code_off, code_on) == (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.OK)
    assert backend.counts() == {"off": 1, "on": 2}


def test_enable_retries_is_read_as_c_core_reads_a_boolean_channel_argument() -> None:
    """Retries are on without the option; the last integer given decides (0 off, any other
    on); a value that is not an integer is ignored."""
    assert retries_enabled([])
    assert not retries_enabled([("grpc.enable_retries", 0)])
    assert retries_enabled([("grpc.enable_retries", 0), ("grpc.enable_retries", 1)])
    assert not retries_enabled([("grpc.enable_retries", False)])
    assert retries_enabled([("grpc.enable_retries", 2)])
    assert not retries_enabled([("grpc.enable_retries", 0), ("grpc.enable_retries", "1")])
    assert retries_enabled([("grpc.max_receive_message_length", 0)])


@pytest.mark.parametrize("source", ["iterator", "write"])
async def test_a_stream_allowed_one_attempt_hands_its_messages_to_grpc_aio(
    plane: ControlPlane, client: XdsClient, source: str
) -> None:
    """A bidirectional call on a route without a retry policy (one attempt) keeps none of its
    messages for replay: grpc.aio's call takes the caller's iterator or writes, the replies
    come back in order, and a failure ends the call after its one attempt."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend, retries=None))
        async with XdsChannel(TARGET, client=client) as channel:
            stub = EchoStub(channel)
            if source == "iterator":
                call = stub.Chat(iter([Text(value="p"), Text(value="q")]), timeout=5)
            else:
                call = stub.Chat(timeout=5)
                await call.write(Text(value="p"))
                await call.write(Text(value="q"))
                await call.done_writing()
            replies = [message.value async for message in call]
            assert call._requests is None  # nothing kept
            failing = stub.Collect(
                iter([Text(value="a")]), timeout=5, metadata=[("x-call", "f"), ("x-fail", "1")]
            )
            assert await failing.code() is grpc.StatusCode.UNAVAILABLE
    assert replies == ["p", "q"]
    assert backend.counts() == {"": 1, "f": 1}


def _broken() -> Iterator[Text]:
    yield Text(value="a")
    raise RuntimeError("the caller's iterator broke")


@pytest.mark.parametrize("source", ["raises", "not iterable"])
async def test_a_request_iterator_that_raises_cancels_a_call_allowed_one_attempt(
    plane: ControlPlane, client: XdsClient, source: str
) -> None:
    """On a route without a retry policy, a request iterator that raises after its first
    message (or requests that are not iterable) cancel the call at once, as grpc.aio does."""
    requests: object = _broken() if source == "raises" else 5
    async with retry_backend() as backend:
        plane.set_all(retrying(backend, retries=None))
        async with XdsChannel(TARGET, client=client) as channel:
            call = EchoStub(channel).Collect(requests, timeout=30)
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(call, 5)
            assert await call.code() is grpc.StatusCode.CANCELLED
