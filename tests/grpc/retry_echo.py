"""A streaming backend that fails the first attempts of a call, and the routes that retry it:
what the request-streaming retry tests share (ours alone and against grpcio's ``xds:///``).

`RetryBackend` serves the echo service's ``Say`` (unary), ``Collect`` (client streaming) and
``Chat`` (bidirectional) on 127.0.0.1 and records, per call (its ``x-call`` metadata), the
messages each attempt read, in order. Each call says with its metadata how its attempts go:

- ``x-fail: N``: the first N attempts fail (after reading every message, or the first
  ``x-read`` of them) with ``x-code`` (UNAVAILABLE unless given), details
  ``attempt <n> failed``;
- ``x-headers``: the attempt sends response headers (``x-sent: headers``) before reading;
- ``x-reply-first`` (``Chat``): the attempt echoes the first message at once.

A call that does not fail answers ``Say`` with its message, ``Collect`` with the messages
joined by commas and ``Chat`` with each message echoed (the ones not echoed yet).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.config.route.v3 import route_pb2

from tests.call.builders import add_route, listener
from xdsclient.testing import builders

from .echo import SERVICE, Text

HEADERS = (("x-sent", "headers"),)


class RetryBackend:
    """One server on 127.0.0.1 (see the module's docstring)."""

    def __init__(self) -> None:
        self.port = 0
        #: call id -> the values each attempt read, in order, one list per attempt
        self.attempts: dict[str, list[list[str]]] = collections.defaultdict(list)
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        server = grpc.aio.server()
        handlers = {
            "Say": grpc.unary_unary_rpc_method_handler(self._say, Text.FromString, _ser),
            "Collect": grpc.stream_unary_rpc_method_handler(self._collect, Text.FromString, _ser),
            "Chat": grpc.stream_stream_rpc_method_handler(self._chat, Text.FromString, _ser),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
        self.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(None)

    def counts(self) -> dict[str, int]:
        """Attempts per call id."""
        return {call: len(attempts) for call, attempts in self.attempts.items()}

    async def _begin(self, context: Any) -> tuple[dict[str, str], list[str], int]:
        metadata = {str(k): str(v) for k, v in context.invocation_metadata() or ()}
        read: list[str] = []
        attempts = self.attempts[metadata.get("x-call", "")]
        attempts.append(read)
        if "x-headers" in metadata:
            await context.send_initial_metadata(HEADERS)
        return metadata, read, len(attempts)

    async def _read(
        self, requests: AsyncIterator[Any], metadata: dict[str, str], read: list[str], attempt: int
    ) -> None:
        limit = int(metadata.get("x-read", "-1")) if _failing(metadata, attempt) else -1
        async for request in requests:
            read.append(request.value)
            if len(read) == limit:
                return

    async def _fail(self, context: Any, metadata: dict[str, str], attempt: int) -> None:
        if _failing(metadata, attempt):
            code = grpc.StatusCode[metadata.get("x-code", "UNAVAILABLE")]
            await context.abort(code, f"attempt {attempt} failed")

    async def _say(self, request: Any, context: Any) -> Any:
        metadata, read, attempt = await self._begin(context)
        read.append(request.value)
        await self._fail(context, metadata, attempt)
        return Text(value=request.value)

    async def _collect(self, requests: AsyncIterator[Any], context: Any) -> Any:
        metadata, read, attempt = await self._begin(context)
        await self._read(requests, metadata, read, attempt)
        await self._fail(context, metadata, attempt)
        return Text(value=",".join(read))

    async def _chat(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        metadata, read, attempt = await self._begin(context)
        echoed = 0
        if "x-reply-first" in metadata:
            first = await anext(aiter(requests))
            read.append(first.value)
            echoed = 1
            yield Text(value=first.value)
        await self._read(requests, metadata, read, attempt)
        await self._fail(context, metadata, attempt)
        for value in read[echoed:]:
            yield Text(value=value)


def _failing(metadata: dict[str, str], attempt: int) -> bool:
    return attempt <= int(metadata.get("x-fail", "0"))


def _ser(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


@contextlib.asynccontextmanager
async def retry_backend() -> AsyncIterator[RetryBackend]:
    """A started `RetryBackend`, stopped at the end."""
    backend = RetryBackend()
    try:
        await backend.start()
        yield backend
    finally:
        await backend.stop()


def retrying(
    backend: RetryBackend,
    *,
    name: str = "streams",
    retries: int | None = 9,
    retry_on: str = "unavailable",
) -> list[Any]:
    """Listener ``name`` routing every path to cluster ``echo`` (``backend``) with a retry
    policy: ``retry_on``, ``retries`` retries (gRPC caps attempts at 5; None: no retry policy),
    backoff 5 to 20 ms."""
    routes = route_pb2.RouteConfiguration(name=f"{name}-routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=[name]), "", "echo")
    if retries is not None:
        policy = route.route.retry_policy
        policy.retry_on = retry_on
        policy.num_retries.value = retries
        policy.retry_back_off.base_interval.FromMilliseconds(5)
        policy.retry_back_off.max_interval.FromMilliseconds(20)
    spec = builders.LocalitySpec(endpoints=[("127.0.0.1", backend.port)], zone="z-echo")
    return [
        listener(name=name, rds=routes.name),
        routes,
        builders.cluster("echo"),
        builders.cluster_load_assignment("echo", [spec]),
    ]
