"""Retries of request-streaming calls on `XdsChannel` (gRFC A6, C-core's retry filter): the
messages are kept and replayed in order on each new attempt until the call commits (its kept
bytes pass ``grpc.per_rpc_retry_buffer_size``, or the server's headers or a message reach it),
against a real backend that fails the first attempts after reading the client's messages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator

import grpc
import pytest

from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane

from .echo import EchoStub, Text, until
from .retry_echo import HEADERS, RetryBackend, retry_backend, retrying

TARGET = "xds:///streams"


def _texts(*values: str) -> list[Text]:
    return [Text(value=value) for value in values]


async def test_client_streaming_messages_are_replayed_in_order_on_each_retry(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A client-streaming call whose first two attempts fail UNAVAILABLE after reading its
    three messages is retried twice; every attempt reads the same messages in the same order,
    and the third answers them."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            reply = await EchoStub(channel).Collect(
                iter(_texts("a", "b", "c")), timeout=5, metadata=[("x-call", "1"), ("x-fail", "2")]
            )
    assert reply.value == "a,b,c"
    assert backend.attempts["1"] == [["a", "b", "c"]] * 3


async def test_a_bidi_call_written_by_the_caller_is_replayed_and_continues_on_the_new_attempt(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A bidirectional call written with ``write``: its first attempt reads one message and
    fails; the second gets that message again, then the ones written after, and echoes them
    all."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            metadata = [("x-call", "w"), ("x-fail", "1"), ("x-read", "1")]
            call = EchoStub(channel).Chat(timeout=5, metadata=metadata)
            await call.write(Text(value="p"))
            await call.write(Text(value="q"))
            await call.write(Text(value="r"))
            await call.done_writing()
            replies = [message.value async for message in call]
            assert await call.code() is grpc.StatusCode.OK
    assert replies == ["p", "q", "r"]
    assert backend.attempts["w"] == [["p"], ["p", "q", "r"]]


async def test_an_async_request_iterator_survives_the_attempt_that_ends_while_it_waits(
    plane: ControlPlane, client: XdsClient
) -> None:
    """The caller's async generator waits between its messages while the first attempt fails:
    the generator is neither cancelled nor restarted, and the next attempt gets the first
    message again and then the rest as the generator gives them."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        go_on = asyncio.Event()

        async def requests() -> AsyncIterator[Text]:
            yield Text(value="first")
            await go_on.wait()
            yield Text(value="second")

        async with XdsChannel(TARGET, client=client) as channel:
            metadata = [("x-call", "g"), ("x-fail", "1"), ("x-read", "1")]
            call = EchoStub(channel).Collect(requests(), timeout=5, metadata=metadata)
            await _attempts(backend, "g", 2)
            go_on.set()
            reply = await call
    assert reply.value == "first,second"
    assert backend.attempts["g"] == [["first"], ["first", "second"]]


async def _attempts(backend: RetryBackend, call: str, count: int) -> None:
    """Return once ``backend`` has seen ``count`` attempts of ``call``."""
    await until(lambda: len(backend.attempts[call]) >= count)


async def test_a_call_whose_messages_pass_the_buffer_is_committed_and_not_retried(
    plane: ControlPlane, client: XdsClient
) -> None:
    """With ``grpc.per_rpc_retry_buffer_size`` 1000, three messages of 600 bytes pass the
    limit: the call commits, and its failed attempt is its last (UNAVAILABLE after one
    attempt); the same call under the default 256 KiB is retried and answered."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        big = ["x" * 600, "y" * 600, "z" * 600]
        options = [("grpc.per_rpc_retry_buffer_size", 1000)]
        async with XdsChannel(TARGET, client=client, channel_options=options) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await EchoStub(channel).Collect(
                    iter(_texts(*big)), timeout=5, metadata=[("x-call", "big"), ("x-fail", "1")]
                )
        async with XdsChannel(TARGET, client=client) as channel:
            reply = await EchoStub(channel).Collect(
                iter(_texts(*big)), timeout=5, metadata=[("x-call", "small"), ("x-fail", "1")]
            )
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert failed.value.details() == "attempt 1 failed"
    assert backend.counts() == {"big": 1, "small": 2}
    assert reply.value == ",".join(big)


async def test_a_call_whose_messages_pass_the_default_buffer_is_not_retried(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Three messages of 100 KiB pass C-core's default limit of 256 KiB: a bidirectional call
    sending them commits, and its failed attempt is not retried."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            call = EchoStub(channel).Chat(
                iter(_texts(*["m" * 100_000] * 3)),
                timeout=5,
                metadata=[("x-call", "1"), ("x-fail", "1")],
            )
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                _ = [message async for message in call]
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert backend.counts() == {"1": 1}


@pytest.mark.parametrize("method", ["Collect", "Chat"])
async def test_a_call_committed_by_the_servers_headers_is_not_retried(
    plane: ControlPlane, client: XdsClient, method: str
) -> None:
    """The server sends its response headers, then fails the attempt UNAVAILABLE: the headers
    committed the call, so it ends with that status after one attempt."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            call = getattr(EchoStub(channel), method)(
                iter(_texts("a")),
                timeout=5,
                metadata=[("x-call", "h"), ("x-fail", "1"), ("x-headers", "1")],
            )
            assert await call.code() is grpc.StatusCode.UNAVAILABLE
            assert tuple(await call.initial_metadata()) == HEADERS
    assert backend.counts() == {"h": 1}


async def test_a_bidi_call_committed_by_a_response_message_is_not_retried(
    plane: ControlPlane, client: XdsClient
) -> None:
    """The server echoes the first message, then fails the attempt: the message reached the
    caller, so the call ends UNAVAILABLE after one attempt with that message read."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            call = EchoStub(channel).Chat(
                iter(_texts("a", "b")),
                timeout=5,
                metadata=[("x-call", "m"), ("x-fail", "1"), ("x-reply-first", "1")],
            )
            assert (await call.read()).value == "a"
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await call.read()
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert backend.attempts["m"] == [["a", "b"]]


async def test_attempts_of_a_failing_stream_are_capped_at_five_and_unlisted_codes_not_retried(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A client-streaming call failing every attempt with a code in ``retry_on`` makes five
    attempts (9 retries asked, gRPC's cap) and ends with the last status; one failing with a
    code not listed makes one."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            stub = EchoStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as capped:
                await stub.Collect(
                    iter(_texts("a")), timeout=5, metadata=[("x-call", "cap"), ("x-fail", "9")]
                )
            with pytest.raises(grpc.aio.AioRpcError) as unlisted:
                await stub.Collect(
                    iter(_texts("a")),
                    timeout=5,
                    metadata=[("x-call", "internal"), ("x-fail", "9"), ("x-code", "INTERNAL")],
                )
    assert (capped.value.code(), capped.value.details()) == (
        grpc.StatusCode.UNAVAILABLE,
        "attempt 5 failed",
    )
    assert unlisted.value.code() is grpc.StatusCode.INTERNAL
    assert backend.counts() == {"cap": 5, "internal": 1}


def _broken_sync() -> Iterator[Text]:
    yield Text(value="a")
    raise RuntimeError("the caller's iterator broke")


async def _broken_async() -> AsyncIterator[Text]:
    yield Text(value="a")
    raise RuntimeError("the caller's iterator broke")


@pytest.mark.parametrize("source", ["sync", "async", "not iterable"])
async def test_a_request_iterator_that_raises_cancels_the_call(
    plane: ControlPlane, client: XdsClient, source: str
) -> None:
    """The caller's request iterator raises after its first message (sync or async), or the
    requests are not iterable: the call is cancelled, as grpc.aio cancels it, at once (the
    attempt is not half-closed and never waits for its deadline), and not retried."""
    sources: dict[str, Callable[[], object]] = {
        "sync": _broken_sync,
        "async": _broken_async,
        "not iterable": lambda: 5,
    }
    requests = sources[source]
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            metadata = [("x-call", "r"), ("x-fail", "1")]
            call = EchoStub(channel).Collect(requests(), timeout=30, metadata=metadata)
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(call, 5)
            assert await call.code() is grpc.StatusCode.CANCELLED
    assert backend.counts() in ({"r": 1}, {})


async def test_writes_refused_by_an_ending_attempt_do_not_hide_the_servers_status(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Calls whose first attempt fails UNAVAILABLE after one message while many more are still
    being written to it: the writes gRPC refuses (its own INTERNAL "Internal error from Core")
    must not stand for the attempt's status, so every call is retried and answered."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        async with XdsChannel(TARGET, client=client) as channel:
            for number in range(20):
                metadata = [("x-call", f"many-{number}"), ("x-fail", "1"), ("x-read", "1")]
                values = [str(i) for i in range(60)]
                call = EchoStub(channel).Chat(iter(_texts(*values)), timeout=5, metadata=metadata)
                replies = [message.value async for message in call]
                assert await call.code() is grpc.StatusCode.OK, number
                assert replies == values, number
