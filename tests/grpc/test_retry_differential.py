"""Retries on `XdsChannel` against grpcio's own ``xds:///`` channel (request-streaming calls, and
unary calls committed by headers): one control plane, one backend that fails the first attempts
of each call after reading its messages, the same calls on both.

Why: C-core's retry filter is the reference for when a client-streaming or bidirectional call is
retried (gRFC A6: until it commits by its buffer limit, the server's headers or a message) and
for what each attempt sends; the backend records the messages every attempt read, so the
comparison covers the attempts, the replayed messages and the final status."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import attrs
import grpc

from tests.lb.differential_pickers import run_grpcio
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane

from .echo import CHAT, COLLECT, SAY, EchoStub, Text
from .retry_echo import retry_backend, retrying

_CHILD = r"""
import json, sys, grpc
from google.protobuf import wrappers_pb2
Text = wrappers_pb2.StringValue
paths = {"Collect": sys.argv[1], "Chat": sys.argv[2], "Say": sys.argv[3]}
channels = {}
out = []
for listener, method, values, metadata, limit in json.loads(sys.stdin.read()):
    key = (listener, limit)
    if key not in channels:
        options = [] if limit is None else [("grpc.per_rpc_retry_buffer_size", limit)]
        channels[key] = grpc.insecure_channel("xds:///" + listener, options=options)
    channel = channels[key]
    kinds = {"Collect": channel.stream_unary, "Chat": channel.stream_stream,
             "Say": channel.unary_unary}
    call = kinds[method](paths[method], request_serializer=Text.SerializeToString,
                         response_deserializer=Text.FromString)
    requests = iter([Text(value=value) for value in values])
    replies = []
    try:
        if method == "Say":
            replies.append(call(Text(value=values[0]), metadata=metadata, timeout=10).value)
        elif method == "Collect":
            replies.append(call(requests, metadata=metadata, timeout=10).value)
        else:
            for reply in call(requests, metadata=metadata, timeout=10):
                replies.append(reply.value)
        out.append(["OK", "", replies])
    except grpc.RpcError as error:
        out.append([error.code().name, error.details(), replies])
print(json.dumps(out), flush=True)
"""


@attrs.frozen(kw_only=True)
class StreamCall:
    """One call: its method (``Say``, ``Collect`` or ``Chat``), request values, the
    backend's instructions (`retry_echo`), and the channel's per-RPC buffer limit (None:
    C-core's default)."""

    method: str
    values: tuple[str, ...]
    metadata: tuple[tuple[str, str], ...]
    limit: int | None = None


def _call(number: int, method: str, values: Sequence[str], **metadata: str) -> StreamCall:
    pairs = (("x-call", str(number)), *((f"x-{k}", v) for k, v in metadata.items()))
    return StreamCall(method=method, values=tuple(values), metadata=pairs)


CALLS = [
    _call(1, "Collect", "abc", fail="2"),
    _call(2, "Collect", "a", fail="9"),
    _call(3, "Collect", "a", fail="9", code="INTERNAL"),
    attrs.evolve(_call(4, "Collect", ["x" * 600] * 3, fail="1"), limit=1000),
    _call(5, "Collect", ["y" * 100_000] * 3, fail="1"),
    _call(6, "Collect", "a", fail="1", headers="1"),
    _call(7, "Chat", "pq", fail="1"),
    _call(8, "Chat", "ab", fail="1", **{"reply-first": "1"}),
    _call(9, "Collect", "abc", fail="1", read="1"),
    _call(10, "Say", "a", fail="1"),
    _call(11, "Say", "a", fail="1", headers="1"),
]
#: grpcio's attempts per call (C-core's rules, checked here so that a change of them shows)
GRPCIO_ATTEMPTS = {
    "1": 3,
    "2": 5,
    "3": 1,
    "4": 1,
    "5": 1,
    "6": 1,
    "7": 2,
    "8": 1,
    "9": 2,
    "10": 2,
    "11": 1,
}
Outcome = tuple[str, str, list[str]]


async def _theirs(plane: ControlPlane, calls: Sequence[StreamCall]) -> list[Outcome]:
    payload = [
        ["streams", c.method, list(c.values), [list(m) for m in c.metadata], c.limit] for c in calls
    ]
    rows = await run_grpcio(
        plane, "streams-grpc", _CHILD, (COLLECT, CHAT, SAY), payload, timeout=40
    )
    return [(code, details, replies) for code, details, replies in rows]


async def _ours(plane: ControlPlane, calls: Sequence[StreamCall]) -> list[Outcome]:
    results = []
    async with XdsClient(plane.address, node_id="streams-ours") as client:
        channels: dict[int | None, XdsChannel] = {}
        try:
            for call in calls:
                channel = channels.get(call.limit)
                if channel is None:
                    options = [] if call.limit is None else [(_LIMIT, call.limit)]
                    channel = channels[call.limit] = XdsChannel(
                        "xds:///streams",
                        client=client,
                        channel_options=options,
                        rng=random.Random(32),
                    )
                results.append(await _one(channel, call))
        finally:
            for channel in channels.values():
                await channel.close()
    return results


_LIMIT = "grpc.per_rpc_retry_buffer_size"


async def _one(channel: XdsChannel, call: StreamCall) -> Outcome:
    stub: Any = EchoStub(channel)
    requests = iter([Text(value=value) for value in call.values])
    replies: list[str] = []
    try:
        if call.method == "Say":
            request = Text(value=call.values[0])
            replies.append((await stub.Say(request, metadata=call.metadata, timeout=10)).value)
        elif call.method == "Collect":
            replies.append((await stub.Collect(requests, metadata=call.metadata, timeout=10)).value)
        else:
            async for reply in stub.Chat(requests, metadata=call.metadata, timeout=10):
                replies.append(reply.value)
    except grpc.aio.AioRpcError as error:
        return (error.code().name, error.details() or "", replies)
    return ("OK", "", replies)


async def test_streaming_retries_make_the_attempts_and_end_as_on_grpcio(
    plane: ControlPlane,
) -> None:
    """Client-streaming and bidirectional calls make as many attempts as on grpcio's channel,
    every attempt reads the same messages in the same order, and each call ends with the same
    code, details and replies: retried up to 5 attempts for a code in ``retry_on``, not for
    another, not once committed by the buffer limit (1000 bytes given, or the default 256 KiB),
    by the server's headers or by a response message; a unary call's headers commit it too."""
    async with retry_backend() as backend:
        plane.set_all(retrying(backend))
        grpc_results = await _theirs(plane, CALLS)
        grpc_attempts = dict(backend.attempts)
        backend.attempts.clear()
        our_results = await _ours(plane, CALLS)
        our_attempts = dict(backend.attempts)
    assert {call: len(reads) for call, reads in grpc_attempts.items()} == GRPCIO_ATTEMPTS
    assert our_attempts == grpc_attempts
    assert our_results == grpc_results
    assert grpc_results[0] == ("OK", "", ["a,b,c"])
    assert grpc_attempts["9"] == [["a"], ["a", "b", "c"]]
