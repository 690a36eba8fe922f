"""The gRPC boundary: channels, credentials, stream calls, and mapping gRPC errors to ours.

Why here: everything grpc-specific the client needs sits in this one module, so the rest of
the client deals in `TransportError` and protobuf messages only. Credentials are read from
files here and never appear in logs or errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import grpc

from ._config import BootstrapError, ChannelCredentials, ServerConfig
from ._errors import TransportError

__all__ = ["TransportOptions", "make_channel", "map_rpc_error"]

_DEFAULT_MAX_RECEIVE = 256 * 1024 * 1024


@attrs.frozen(kw_only=True)
class TransportOptions:
    """Channel options: the receive limit (gRPC's 4 MiB default is too small for xDS), keepalive."""

    max_receive_message_length: int = _DEFAULT_MAX_RECEIVE
    keepalive_time: float | None = None  # seconds between pings; None disables
    keepalive_timeout: float = 20.0


def make_channel(server: ServerConfig, options: TransportOptions) -> grpc.aio.Channel:
    """A channel to ``server`` with its credentials and our options."""
    channel_options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", options.max_receive_message_length),
        ("grpc.max_send_message_length", -1),
    ]
    if options.keepalive_time is not None:
        channel_options += [
            ("grpc.keepalive_time_ms", int(options.keepalive_time * 1000)),
            ("grpc.keepalive_timeout_ms", int(options.keepalive_timeout * 1000)),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.keepalive_permit_without_calls", 1),
            # An xDS stream is mostly idle: without these, gRPC spaces pings on an idle
            # connection five minutes apart whatever keepalive_time says.
            ("grpc.http2.min_time_between_pings_ms", int(options.keepalive_time * 1000)),
            ("grpc.http2.min_ping_interval_without_data_ms", int(options.keepalive_time * 1000)),
            # gRPC waits for a ping's ack for this long (60 s by default), keepalive or not.
            ("grpc.http2.ping_timeout_ms", int(options.keepalive_timeout * 1000)),
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
    exc: grpc.aio.AioRpcError, *, server: str, options: TransportOptions
) -> TransportError:
    """A `TransportError` that says what happened and, where it helps, what to change."""
    code = exc.code()
    details = exc.details() or ""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
        message = (
            f"xDS server {server} sent a message larger than max_receive_message_length "
            f"({options.max_receive_message_length} bytes): {details}; raise the limit with "
            "XdsClient(max_receive_message_length=...)"
        )
    else:
        message = f"xDS stream to {server} failed: {code.name}: {details}"
    return TransportError(message, code=code.name)
