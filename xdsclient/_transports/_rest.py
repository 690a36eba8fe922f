"""The REST-JSON transport: polling ``POST {url}/v3/discovery:{resource}`` (Envoy's
``api_config_source`` with ``api_type: REST``), behind the same `Transport` interface as gRPC.

Why a stream over polls: the session already decides what to request and how to answer each
response; here a "stream" is a sequence of polls, one outstanding at a time:
- `write` keeps the session's latest request (its names, and the ACK or NACK of the last
  response in ``version_info`` / ``error_detail``); each poll sends the latest one.
- REST keeps no stream, so every poll stands alone and carries the full node (as Envoy sends
  it; a server may need it on each request: sovereign answers 422 without it, go-control-plane
  looks the node up per request). The session puts the node in the first request of a stream
  only (the gRPC rule); the transport keeps it and adds it to every poll.
- The body is proto3 JSON with the proto field names (``resource_names``, ``version_info``,
  ``error_detail``...), as Envoy writes it, and with every field that has no presence written
  even when empty (``"details": []`` in a NACK's status): servers that read only those names or
  validate with a strict schema (sovereign) otherwise miss the names, the version or the NACK.
- `read` polls: at once when the request's names changed (a new subscription should not wait a
  refresh period; that poll carries no version, so a server that only compares versions still
  answers it), otherwise ``refresh_delay`` after the last response. A 200 with a
  ``DiscoveryResponse`` body is returned; 304 and an empty body mean "nothing new" and the next
  poll follows ``refresh_delay`` later. A server that holds the request until something changes
  (long polling) is simply a slow 200.
- HTTP errors, timeouts (``request_timeout``), bodies that are not a ``DiscoveryResponse`` and
  responses of another type end the stream with a `TransportError`: the drive loop backs off
  and reports it as it would a failed gRPC stream.
Headers (tokens) go on every request and are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from typing import TYPE_CHECKING, Any

from .._errors import TransportError
from .._protocol._services import PER_TYPE_SERVICES
from ._base import StreamSpec
from ._formats import FileFormat, FormatError, parse_response

if TYPE_CHECKING:
    from .._settings._config import ChannelCredentials
    from .._settings._options import ClientOptions
    from .._settings._sources import RestSource

__all__ = ["RestStream", "RestTransport", "rest_path"]

logger = logging.getLogger("xdsclient.transport.rest")


def rest_path(type_url: str) -> str:
    """``/v3/discovery:{resource}`` for a type; raises `TransportError` when it has none."""
    service = PER_TYPE_SERVICES.get(type_url)
    if service is None or service.rest is None:
        raise TransportError(f"no REST-JSON endpoint serves {type_url}")
    return f"/v3/discovery:{service.rest}"


class RestTransport:
    """Polls one REST-JSON endpoint; one HTTP session shared by every type's stream."""

    def __init__(self, source: RestSource, options: ClientOptions) -> None:
        try:
            import aiohttp  # noqa: F401
        except ImportError:
            raise TransportError(
                "REST sources need aiohttp: pip install 'xdsclient[rest]'"
            ) from None
        self.source = source
        self.limit = options.max_receive_message_length
        self._session: Any = None
        #: type URL -> the names of its last poll, across streams (a reconnect is no change)
        self.polled: dict[str, list[str]] = {}
        #: the node of the first request that carried one: it goes on every poll
        self.node: Any = None

    def http(self) -> Any:
        """The aiohttp session, made on first use (it needs the running loop)."""
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(ssl=_ssl_context(self.source) or True)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=dict(self.source.headers)
            )
        return self._session

    async def open(self, spec: StreamSpec) -> RestStream:
        if spec.delta or spec.type_url is None or not spec.discovery:
            raise TransportError("REST-JSON polling is state of the world, one type per stream")
        return RestStream(
            self, spec.type_url, self.source.url.rstrip("/") + rest_path(spec.type_url)
        )

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


class RestStream:
    """Polls for one type: the latest request goes out, one poll at a time."""

    def __init__(self, transport: RestTransport, type_url: str, url: str) -> None:
        self._transport = transport
        self._type_url = type_url
        self._url = url
        self._request: Any = None
        self._written = asyncio.Event()
        self._polled_names: list[str] | None = None
        self._next_poll = 0.0  # time.monotonic() of the next periodic poll
        self._closed = False

    async def write(self, request: Any) -> None:
        if self._closed:
            raise TransportError(f"REST poll of {self._url} is closed")
        if self._transport.node is None and request.HasField("node"):
            self._transport.node = request.node
        self._request = request
        self._written.set()

    async def read(self) -> Any:
        source = self._transport.source
        while True:
            await self._due()
            response = await self._poll()
            self._next_poll = time.monotonic() + source.refresh_delay
            if response is not None:
                return response

    async def _due(self) -> None:
        """Until there is a request and a poll is due: at once for new names, else on time."""
        while True:
            if self._closed:
                raise TransportError(f"REST poll of {self._url} is closed")
            request = self._request
            if request is not None:
                names = list(request.resource_names)
                delay = self._next_poll - time.monotonic()
                if names != self._polled_names or delay <= 0:
                    return
                self._written.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):  # not wait_for: 3.11's may eat a cancel
                        await self._written.wait()
                continue
            self._written.clear()
            await self._written.wait()

    async def _poll(self) -> Any:
        """One POST of the latest request; the response, or None when nothing is new."""
        import aiohttp

        body = self._body_of(self._request)
        source = self._transport.source
        try:
            async with self._transport.http().post(
                self._url,
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=source.request_timeout),
            ) as reply:
                if reply.status == 304:
                    return None
                if reply.status != 200:
                    text = (await reply.text())[:200]
                    raise TransportError(
                        f"REST poll of {self._url} failed: HTTP {reply.status} {text}".rstrip(),
                        code=str(reply.status),
                    )
                data = await self._body(reply)
        except TimeoutError:
            raise TransportError(
                f"REST poll of {self._url} timed out after {source.request_timeout:g} s"
            ) from None
        except aiohttp.ClientError as exc:
            raise TransportError(f"REST poll of {self._url} failed: {exc}") from None
        return self._decode(data)

    def _body_of(self, latest: Any) -> str:
        """The JSON of the poll for ``latest``: the full node on it, and no version when it
        names resources the last poll did not."""
        from google.protobuf import json_format

        request = type(latest)()
        request.CopyFrom(latest)
        names = list(request.resource_names)
        previous = self._transport.polled.get(self._type_url)
        if previous is not None and names != previous:
            # A stateless REST server compares versions only (go-control-plane and sovereign
            # answer 304 to a current version): ask for new names as a first request would.
            request.version_info = ""
        node = self._transport.node
        if node is not None and not request.HasField("node"):
            request.node.CopyFrom(node)
        self._polled_names = self._transport.polled[self._type_url] = names
        return json_format.MessageToJson(
            request,
            indent=None,
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )

    async def _body(self, reply: Any) -> bytes:
        """The whole body, refusing one longer than max_receive_message_length."""
        limit = self._transport.limit
        chunks: list[bytes] = []
        size = 0
        async for chunk in reply.content.iter_chunked(1 << 16):
            size += len(chunk)
            if size > limit:
                raise TransportError(
                    f"REST poll of {self._url}: body exceeds max_receive_message_length ({limit})"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _decode(self, data: bytes) -> Any:
        if not data.strip():
            return None
        try:
            response = parse_response(data, FileFormat.JSON)
        except FormatError as exc:
            raise TransportError(
                f"REST poll of {self._url}: not a DiscoveryResponse: {exc}"
            ) from None
        if not response.type_url:
            response.type_url = self._type_url
        elif response.type_url != self._type_url:
            raise TransportError(
                f"REST poll of {self._url}: answered {response.type_url}, not {self._type_url}"
            )
        return response

    def close(self) -> None:
        self._closed = True
        self._written.set()


def _ssl_context(source: RestSource) -> ssl.SSLContext | None:
    if not source.url.startswith("https:"):
        return None
    credentials: ChannelCredentials = source.channel_credentials
    try:
        context = ssl.create_default_context(cafile=credentials.ca_certificate_file)
        if credentials.certificate_file is not None:
            context.load_cert_chain(credentials.certificate_file, credentials.private_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TransportError(f"REST TLS credentials for {source.url}: {exc}") from None
    return context
