"""The grpc.aio transport: channels, credentials, stream calls, gRPC errors mapped to ours.

Why here: everything grpc-specific the client needs sits in this one module, so the rest of the
client deals in `TransportError` and protobuf messages only. Credentials are read from files
here and never appear in logs or errors. A stream is established when gRPC has sent its headers
on a ready connection (``wait_for_connection``): through a proxy that holds the connection, that
is when the proxy lets it through, not when the call object was made. A stream measures the
messages it decodes, and around a large one (before its decode, and before the next read) hands
glibc's freed memory back to the system (`.._runtime._malloc`). A stream receives each
response's bytes itself and decodes them once, handing both on (`GrpcStream.read_raw`): the
SotW classify step walks those bytes rather than serializing the parsed message again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from .._call_status import CallStatuses
from .._errors import TransportError
from .._runtime._malloc import MemoryRelease
from .._settings._config import BootstrapError, ChannelCredentials, ServerConfig
from ._base import StreamSpec

if TYPE_CHECKING:
    from .._settings._options import ClientOptions

__all__ = ["GrpcStream", "GrpcTransport", "map_rpc_error"]

logger = logging.getLogger("xdsclient.transport")


class GrpcTransport:
    """One grpc.aio channel to one management server."""

    def __init__(
        self,
        server: ServerConfig,
        options: ClientOptions,
        *,
        memory: MemoryRelease | None = None,
    ) -> None:
        self._server = server
        self._options = options
        self._channel = make_channel(server, options)
        #: trims the heaps after a large message of any of its streams
        self._memory = MemoryRelease.for_platform() if memory is None else memory

    @classmethod
    def for_server(cls, server: ServerConfig, options: ClientOptions) -> GrpcTransport:
        """The `TransportFactory` form."""
        return cls(server, options)

    async def open(self, spec: StreamSpec) -> GrpcStream:
        """Call the spec's method with its codecs; return once the call is established."""
        if not spec.method:
            raise TransportError(f"no gRPC method carries the {spec} stream")
        decode = _measured(spec.response_deserializer, self._memory)
        call = self._channel.stream_stream(
            spec.method,
            request_serializer=spec.request_serializer,
            response_deserializer=decode,
        )()
        stream = GrpcStream(call, self._server.uri, self._options, self._memory, decode=decode)
        try:
            await call.wait_for_connection()
        except grpc.aio.AioRpcError as exc:
            stream.close()
            raise map_rpc_error(exc, server=self._server.uri, options=self._options) from None
        except BaseException:
            stream.close()
            raise
        return stream

    async def close(self) -> None:
        await self._channel.close()


class GrpcStream:
    """One established grpc.aio stream call."""

    def __init__(
        self,
        call: Any,
        server: str,
        options: ClientOptions,
        memory: MemoryRelease | None = None,
        *,
        decode: Callable[[bytes], Any] | None = None,
    ) -> None:
        """``decode``: the response decoder, to receive every response's bytes and decode them
        here (see `_receive`); None: every read through ``call.read()``."""
        self._call = call
        self._server = server
        self._options = options
        self._statuses = CallStatuses(call)
        self._memory = MemoryRelease(None) if memory is None else memory
        self._receive = _receive(call, decode)

    async def write(self, request: Any) -> None:
        try:
            await self._call.write(request)
        except grpc.aio.AioRpcError as exc:
            # ended as we wrote: the server's status, not gRPC's own for the failed write
            reported = (exc.code().name, exc.details() or "")
            code, details = await self._statuses.server_status(reported)
            if (code, details) != reported:
                raise TransportError(
                    f"xDS stream to {self._server} failed: {code}: {details}", code=code
                ) from None
            raise map_rpc_error(exc, server=self._server, options=self._options) from None
        except Exception as exc:  # the call ended under us: the status it ended with
            unknown = ("UNKNOWN", f"closed while writing: {exc!r}")
            code, details = await self._statuses.server_status(unknown)
            raise TransportError(
                f"xDS stream to {self._server} failed: {code}: {details}", code=code
            ) from exc

    async def read(self) -> Any:
        response, _ = await self.read_raw()
        return response

    async def read_raw(self) -> tuple[Any, bytes | None]:
        """The next response and the bytes it was decoded from (None where grpc.aio decoded
        it: a call without the receive `_receive` relies on), for a reader that walks them
        instead of serializing the message again; raises as `read` does."""
        # The last response is applied, ACKed and let go by now (the driver reads the next
        # one only then): trim what a large one left in glibc's heaps.
        self._memory.settle()
        try:
            if self._receive is not None:
                response, raw = await self._receive()
            else:
                response, raw = await self._call.read(), None
        except grpc.aio.AioRpcError as exc:
            raise map_rpc_error(exc, server=self._server, options=self._options) from None
        if response is grpc.aio.EOF:
            status = await self._call.code()
            raise TransportError(
                f"xDS server {self._server} ended the stream ({status.name})", code=status.name
            )
        return response, raw

    def close(self) -> None:
        self._call.cancel()


def _receive(
    call: Any, decode: Callable[[bytes], Any] | None
) -> Callable[[], Awaitable[tuple[Any, bytes | None]]] | None:
    """Every read of ``call`` as one receive of its bytes, decoded here once: the response
    with its bytes. None (read as grpc.aio does, no bytes) when the call has not the receive
    this relies on (grpc.aio's internal ``_cython_call``), or ``decode`` is None.

    The bytes: grpc.aio's ``read`` receives them too, decodes them and lets them go, so a
    reader of a response's bytes (the SotW classify step) would have to serialize the parsed
    message again. The first read: grpc.aio's asks gRPC for a message only once the server's
    headers have arrived, and a server sends its headers with its first response, so the first
    response reaches the loop through two completions one after the other (the headers, then
    the message), each a hand-off from gRPC's thread to grpc.aio's poller thread to the loop.
    gRPC (C-core) takes a message receive before the headers arrive and completes it after
    them, so asked at once the first response arrives in one hand-off (on a busy machine,
    each hand-off can wait a few ms for a CPU). A response that does not decode reads as
    None, as through grpc.aio's ``read`` (which logs it): the driver reads on.
    """
    receive = getattr(getattr(call, "_cython_call", None), "receive_serialized_message", None)
    if decode is None or not callable(receive):
        return None

    async def read() -> tuple[Any, bytes | None]:
        try:
            raw = await receive()
        except asyncio.CancelledError:
            call.cancel()  # gRPC cannot take back a receive it was asked for: end the call
            raise
        if raw is grpc.aio.EOF or raw is None:
            return await call.read(), None  # ended: grpc.aio raises or reports its status
        try:
            return decode(raw), raw
        except Exception:
            logger.exception("xDS response of %d bytes does not decode", len(raw))
            return None, None

    return read


def _measured(decode: Callable[[bytes], Any], memory: MemoryRelease) -> Callable[[bytes], Any]:
    """``decode``, telling ``memory`` of each message's size first (gRPC calls it on our loop,
    once gRPC has copied the message out of its own buffers)."""

    def deserialize(data: bytes) -> Any:
        memory.received(len(data))
        return decode(data)

    return deserialize


def make_channel(server: ServerConfig, options: ClientOptions) -> grpc.aio.Channel:
    """A channel to ``server`` with its credentials and our options."""
    channel_options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", options.max_receive_message_length),
        ("grpc.max_send_message_length", -1),
        # A subchannel of our own: gRPC's global pool would hand this channel another live
        # channel's subchannel to the same address, with its reconnect backoff and its last
        # "connection refused" (a server that once listened on this port), and the first
        # stream would fail on that old state instead of connecting to the server now there.
        ("grpc.use_local_subchannel_pool", 1),
    ]
    if options.keepalive_time is not None:
        keepalive_ms = int(options.keepalive_time * 1000)
        timeout_ms = int(options.keepalive_timeout * 1000)
        channel_options += [
            ("grpc.keepalive_time_ms", keepalive_ms),
            ("grpc.keepalive_timeout_ms", timeout_ms),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.keepalive_permit_without_calls", 1),
            # An xDS stream is mostly idle: without these, gRPC spaces pings on an idle
            # connection five minutes apart whatever keepalive_time says.
            ("grpc.http2.min_time_between_pings_ms", keepalive_ms),
            ("grpc.http2.min_ping_interval_without_data_ms", keepalive_ms),
            # gRPC waits for a ping's ack for this long (60 s by default), keepalive or not.
            ("grpc.http2.ping_timeout_ms", timeout_ms),
        ]
    target = server.uri
    credentials = server.channel_credentials
    if credentials.type == "insecure":
        return grpc.aio.insecure_channel(target, options=channel_options)
    return grpc.aio.secure_channel(target, _ssl_credentials(credentials), options=channel_options)


def _ssl_credentials(credentials: ChannelCredentials) -> grpc.ChannelCredentials:
    def read(path: str | None, what: str) -> bytes | None:
        if path is None:
            return None
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise BootstrapError(
                f"channel_creds: cannot read {what} file {path!r}: {exc.strerror}"
            ) from None

    return grpc.ssl_channel_credentials(
        root_certificates=read(credentials.ca_certificate_file, "ca_certificate"),
        private_key=read(credentials.private_key_file, "private_key"),
        certificate_chain=read(credentials.certificate_file, "certificate"),
    )


def map_rpc_error(
    exc: grpc.aio.AioRpcError, *, server: str, options: ClientOptions
) -> TransportError:
    """A `TransportError` that says what happened and, where it helps, what to change."""
    code = exc.code()
    details = exc.details() or ""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
        message = (
            f"xDS server {server} sent a message larger than max_receive_message_length "
            f"({options.max_receive_message_length} bytes): {details}; raise the limit with "
            "ClientOptions(max_receive_message_length=...)"
        )
    else:
        message = f"xDS stream to {server} failed: {code.name}: {details}"
    return TransportError(message, code=code.name)
