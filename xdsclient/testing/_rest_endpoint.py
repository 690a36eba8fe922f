"""The test control plane's REST-JSON endpoint: the same resources over HTTP polling.

Why in the test kit: users test their clients against all three transports the same way, and
our own behavioural suite runs over gRPC, files and REST from one `ControlPlane`. It answers
``POST /v3/discovery:{listeners|routes|clusters|endpoints|...}`` as go-control-plane's REST
handler does: the requested resources (every resource for a wildcard request of LDS/CDS) at
the type's current version; 304 Not Modified when the request's ``version_info`` is already
current; with ``long_poll`` it holds such a request until something changes (or ``hold``
seconds pass, then 304). Requests are read in proto3 JSON with either field-name form
(``resource_names`` or ``resourceNames``); responses are written with the proto field names, as
Envoy and sovereign write them. With ``strict`` it behaves as sovereign does: a request without
``node`` is answered 422, and only the proto field names are read (``versionInfo``,
``errorDetail``... are ignored), so a client that sends anything else is seen to fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import Callable
from typing import Any

from .._names import WILDCARD
from .._protocol._services import PER_TYPE_SERVICES
from ._records import Journal, ReceivedRequest, SentResponse
from ._store import ResourceStore

__all__ = ["RestEndpoint"]

_FULL_STATE_REST = {"listeners", "clusters"}


class RestEndpoint:
    """An aiohttp server on 127.0.0.1 answering REST-JSON discovery requests from a store,
    recording into the control plane's journal; ``paused()`` true answers 503."""

    def __init__(
        self,
        store: ResourceStore,
        journal: Journal,
        *,
        paused: Callable[[], bool],
        long_poll: bool,
        hold: float,
        ssl_context: ssl.SSLContext | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._journal = journal
        self._paused = paused
        self._clock = clock
        self._changed = asyncio.Event()
        store.listen(lambda _: self._wake())
        self._long_poll = long_poll
        self._hold = hold
        self._ssl = ssl_context
        self._runner: Any = None
        self._closing = False
        self.port = 0
        #: HTTP status to answer with instead of serving (a fault), or None
        self.fail_with: int | None = None
        #: a body to send instead of the real response (a fault), or None
        self.raw_body: bytes | None = None
        #: the headers of the last request (to check what a client sends)
        self.last_headers: dict[str, str] = {}
        #: answer 422 without ``node`` and read only proto field names (as sovereign does)
        self.strict = False

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v3/discovery:{resource}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self._ssl)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self._closing = True
        self._wake()  # held long polls answer now
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web
        from google.protobuf import json_format

        self.last_headers = dict(request.headers)
        resource = request.match_info["resource"]
        type_url = next((url for url, s in PER_TYPE_SERVICES.items() if s.rest == resource), None)
        if type_url is None:
            return web.Response(status=404, text=f"no REST endpoint for {resource}")
        try:
            message, has_node = self._parse(await request.text())
        except (ValueError, json_format.ParseError) as exc:
            return web.Response(status=400, text=str(exc))
        if not message.type_url:
            message.type_url = type_url
        self._journal.received(
            ReceivedRequest(
                time=self._clock(), stream=0, method=f"REST {resource}", message=message
            )
        )
        if not has_node:
            return web.Response(status=422, text='{"detail": "field required: node"}')
        if self.fail_with is not None:
            return web.Response(status=self.fail_with, text="failing on purpose")
        if self._paused():
            return web.Response(status=503, text="paused")
        if self.raw_body is not None:
            return web.Response(body=self.raw_body, content_type="application/json")
        deadline = self._clock() + self._hold
        while message.version_info == self._store.type_version(type_url):
            if not self._long_poll or self._closing or self._clock() >= deadline:
                return web.Response(status=304)
            await wait_event(self._changed, deadline - self._clock())
        response, names = self._store.snapshot(type_url, self._wanted(message, resource))
        self._journal.sent(
            SentResponse(time=self._clock(), stream=0, type_url=type_url, nonce="", names=names)
        )
        body = json_format.MessageToJson(response, indent=None, preserving_proto_field_name=True)
        return web.Response(text=body, content_type="application/json")

    def _parse(self, text: str) -> tuple[Any, bool]:
        """The request, and whether it is acceptable for its node (always, unless strict)."""
        from envoy.service.discovery.v3.discovery_pb2 import DiscoveryRequest
        from google.protobuf import json_format

        if not self.strict:
            return json_format.Parse(text, DiscoveryRequest()), True
        document = json.loads(text)
        if not isinstance(document, dict):
            raise ValueError("the body is not a JSON object")
        names = DiscoveryRequest.DESCRIPTOR.fields_by_name
        known = {key: value for key, value in document.items() if key in names}
        return json_format.ParseDict(known, DiscoveryRequest()), "node" in document

    def _wake(self) -> None:
        """Wake every held long poll (each waits on the event it found)."""
        self._changed.set()
        self._changed = asyncio.Event()

    @staticmethod
    def _wanted(message: Any, resource: str) -> set[str] | None:
        """The names asked for; None for every resource (a wildcard request of LDS/CDS)."""
        names = set(message.resource_names)
        if resource in _FULL_STATE_REST and (not names or WILDCARD in names):
            return None
        return names - {WILDCARD}


async def wait_event(event: asyncio.Event, timeout: float) -> None:
    """Until ``event`` is set or ``timeout`` seconds pass."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), max(timeout, 0.0))
