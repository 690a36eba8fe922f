"""Servers that end xDS streams the way real ones do now and then, on 127.0.0.1: to check that
the load tester lives through them by the client's own stream rules.

`Ending` serves every SotW xDS method (Delta is UNIMPLEMENTED): each stream reads its first
request, then (``answer``) sends one Listener, then ends with ``code``; after ``limit`` streams
it stops ending them (it holds the next streams open, reading), so that what a client did can
be counted once it is quiet.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf import any_pb2

from tests.conformance.servers import XDS_SERVICES
from xdsclient._protocol._messages import DiscoveryRequest, DiscoveryResponse
from xdsclient.resources import LISTENER
from xdsclient.testing.builders import api_listener


class Ending:
    """Every SotW xDS method; its streams end with ``code`` after (``answer``) one response."""

    def __init__(self, code: grpc.StatusCode, *, answer: bool, limit: int = 1_000_000) -> None:
        self.code = code
        self.answer = answer
        self.limit = limit
        #: streams opened so far (each counted once its first request arrived)
        self.streams = 0

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        """The generic handlers to serve (see `tests.conformance.servers.grpc_server`)."""
        handlers = []
        for service in XDS_SERVICES:
            methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
            if service.sotw_method is not None:
                methods[service.sotw_method] = grpc.stream_stream_rpc_method_handler(
                    self._serve, request_deserializer=DiscoveryRequest.FromString
                )
            handlers.append(grpc.method_handlers_generic_handler(service.name, methods))
        return handlers

    async def _serve(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[bytes]:
        await anext(requests)
        self.streams += 1
        if self.streams > self.limit:
            async for _ in requests:
                pass
            return
        if self.answer:
            body = any_pb2.Any()
            body.Pack(api_listener("l", route_config_name="routes"))
            response = DiscoveryResponse(
                version_info="1", nonce=str(self.streams), type_url=LISTENER.type_url,
                resources=[body],
            )  # fmt: skip
            yield response.SerializeToString()
        if self.code != grpc.StatusCode.OK:
            context.set_code(self.code)
            context.set_details("this server ends every stream")
