"""A real xDS management server on loopback, for tests, examples and benchmarks.

Why ours: testing a client against mocks proves little; this is a grpc.aio server that speaks
every variant (ADS and per-type services, SotW and Delta) by the spec, so tests exercise real
streams, real protobuf and real sockets. It also lets a test break things on purpose: close
streams with a status, stop answering, send any raw response, restart (keeping its port in
between: `_ports.py`), make a seeded mistake.

`ControlPlane` is the facade over its parts, each of which owns one thing:

- `_store.py`: the resources and their versions; listeners hear of changes;
- `_server_sotw.py`, `_server_delta.py`: sans-I/O server streams, the serving rules (what a
  request changes, which responses are owed), tested alone without gRPC;
- `_faults.py`: the seeded bugs, as hooks those streams call at defined points;
- `_encoding.py`: responses as bytes, each body encoded once and shared among streams;
- `_grpc_front.py`, `_rest_endpoint.py`: the gRPC and REST-JSON front ends over the store;
- `_records.py`: the journal of requests and responses every front end records into;
- `_lrs_server.py`: the load reporting (LRS) server, served by the gRPC front end.

TTLs: a resource set with a TTL goes out wrapped in ``Resource`` (SotW) with its TTL;
`heartbeat` sends body-less refreshes.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

import grpc
from google.protobuf import any_pb2

from .._protocol._messages import DeltaDiscoveryResponse
from .._transports._formats import dump_response, format_of
from ..resources import ENDPOINT
from ._faults import Abort, Faults
from ._grpc_front import GrpcFront, ListenError
from ._lrs_server import LoadReportingServer, ReceivedLoadReport
from ._ports import KeptPort
from ._records import Journal, ReceivedRequest, SentResponse
from ._rest_endpoint import RestEndpoint
from ._seeded import SeededBug
from ._store import ResourceStore

__all__ = ["ControlPlane", "ListenError", "ReceivedRequest", "SentResponse"]


class ControlPlane:
    """An xDS management server bound to 127.0.0.1 (port 0 picks a free one).

    Use it as an async context manager. Resources are protobuf messages; `set` adds or replaces
    one, `remove` deletes one, and every connected stream hears of it as the spec says.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        server_credentials: grpc.ServerCredentials | None = None,
        bugs: Collection[SeededBug] = (),
    ) -> None:
        """``bugs``: protocol mistakes to make on purpose (`SeededBug`), none by default."""
        self._host = host
        self._faults = Faults(bugs)
        #: The seeded bugs it makes.
        self.bugs = self._faults.bugs
        self._store = ResourceStore()
        self._journal = Journal()
        #: The load reporting (LRS) server: `configure` what it asks, read what it received.
        self.load_reporting = LoadReportingServer()
        self._grpc = GrpcFront(
            host=host,
            port=port,
            credentials=server_credentials,
            store=self._store,
            faults=self._faults,
            journal=self._journal,
            load_reporting=self.load_reporting,
        )
        #: Every request received, in order.
        self.requests: list[ReceivedRequest] = self._journal.requests
        #: Every response sent, in order.
        self.responses: list[SentResponse] = self._journal.responses
        self._arrived = asyncio.Event()
        self._journal.listen(self._arrived.set)
        self._rest: RestEndpoint | None = None
        self._kept = KeptPort()

    @property
    def ignore_initial_resource_versions(self) -> bool:
        """Fault: a Delta stream's initial_resource_versions are ignored (everything is
        resent)."""
        return self._faults.ignore_initial_resource_versions

    @ignore_initial_resource_versions.setter
    def ignore_initial_resource_versions(self, value: bool) -> None:
        self._faults.ignore_initial_resource_versions = value

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ControlPlane:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        if self._rest is not None:
            await self._rest.stop()

    async def start(self) -> None:
        """Start serving (again, on the same port after `stop`); `ListenError` when a socket
        listens on the port."""
        await self._grpc.start()
        self._kept.release()

    async def stop(self, grace: float | None = None, *, keep_port: bool = False) -> None:
        """Stop serving; every open stream ends. Resources are kept for the next `start`.

        ``keep_port``: the port stays this control plane's until it starts again: no other
        socket on the machine takes it in between (another server, an outgoing connection),
        and connections to it are refused as to a stopped server. Else it is given back (a
        kept one too).
        """
        if keep_port and self._grpc.serving:
            self._kept.keep(self.port, self._host)
        await self._grpc.stop(grace)
        if not keep_port:
            self._kept.release()

    async def restart(self) -> None:
        """Stop and start again on the same port (kept in between), keeping every resource."""
        await self.stop(keep_port=True)
        await self.start()

    @property
    def port(self) -> int:
        """The port it listens on (chosen when it starts, unless given)."""
        return self._grpc.port

    @property
    def address(self) -> str:
        """``host:port`` to dial."""
        return f"{self._host}:{self.port}"

    @property
    def load_reports(self) -> list[ReceivedLoadReport]:
        """Every load report (LRS request after a stream's first) received, in order."""
        return self.load_reporting.reports

    @property
    def stream_count(self) -> int:
        """Streams open now."""
        return self._grpc.count

    # ------------------------------------------------------------------ resources

    def set(
        self,
        resource: Any,
        *,
        name: str | None = None,
        ttl: float | None = None,
    ) -> str:
        """Add or replace a resource (a protobuf message); returns its new version.

        The name is the message's ``name`` (``cluster_name`` for ClusterLoadAssignment) unless
        given. With ``ttl`` (seconds) it is served with that TTL.
        """
        packed = any_pb2.Any()
        packed.Pack(resource)
        if name is None:
            name = resource.cluster_name if packed.type_url == ENDPOINT.type_url else resource.name
        return self.set_packed(packed, name=str(name), ttl=ttl)

    def set_packed(self, packed: Any, *, name: str, ttl: float | None = None) -> str:
        """Add or replace a resource given as an ``Any``, for types we do not know."""
        return self._store.set(packed.type_url, name, packed, ttl)

    def set_all(self, resources: Iterable[Any]) -> None:
        """`set` many resources, with one wake-up of the streams."""
        with self._store.batch():
            for resource in resources:
                self.set(resource)

    def remove(self, type_url: str, name: str) -> None:
        """Delete a resource; streams that have it hear of it (LDS/CDS state, Delta removal)."""
        self._store.remove(type_url, name)

    def resources(self, type_url: str) -> dict[str, Any]:
        """The current resources of a type, as ``name -> Any``."""
        return {name: stored.packed for name, stored in self._store.of_type(type_url).items()}

    def version(self, type_url: str, name: str) -> str | None:
        """The version a resource is served at, or None when it is not served."""
        stored = self._store.get(type_url, name)
        return None if stored is None else stored.version

    def heartbeat(self, type_url: str, name: str) -> None:
        """Send a TTL refresh (a body-less ``Resource`` at the current version) to every stream
        that has the resource."""
        if self._store.get(type_url, name) is None:
            raise KeyError(f"no {type_url} {name!r} to heartbeat")
        for serving in self._grpc.streams():
            message = serving.stream.heartbeat(type_url, name)
            if message is not None:
                serving.send(message)

    # ------------------------------------------------------------------ faults

    @property
    def paused(self) -> bool:
        """Whether it stopped answering (`pause`)."""
        return self._grpc.paused

    def pause(self) -> None:
        """Stop answering (requests are still read and logged)."""
        self._grpc.paused = True

    def resume(self) -> None:
        """Answer again, catching every stream up."""
        self._grpc.paused = False
        self._grpc.wake_all()

    def close_streams(
        self, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE, details: str = ""
    ) -> None:
        """End every open stream with this status."""
        self._grpc.end_all(Abort(code.name, details or f"closed by the test ({code.name})"))

    def send_raw(self, response: Any, *, stream: int | None = None) -> None:
        """Send this response as given (no bookkeeping) on one stream, or on every open stream
        of the matching kind (SotW or Delta)."""
        delta = isinstance(response, DeltaDiscoveryResponse)
        for serving in self._grpc.streams():
            candidate = serving.stream
            if (stream is None and candidate.delta == delta) or candidate.id == stream:
                serving.send(response)

    # ------------------------------------------------------------------ observing

    async def wait_for_request(
        self, predicate: Callable[[ReceivedRequest], bool], *, timeout: float = 5.0, start: int = 0
    ) -> ReceivedRequest:
        """The first request (from index ``start`` of `requests`) matching ``predicate``."""
        async with asyncio.timeout(timeout):
            while True:
                self._arrived.clear()
                found = next((r for r in self.requests[start:] if predicate(r)), None)
                if found is not None:
                    return found
                await self._arrived.wait()

    def acks(self, type_url: str) -> list[ReceivedRequest]:
        """Requests answering a response of this type without a NACK."""
        return [
            r
            for r in self.requests
            if r.type_url == type_url
            and r.message.response_nonce
            and not r.message.HasField("error_detail")
        ]

    def nacks(self, type_url: str | None = None) -> list[ReceivedRequest]:
        """Requests carrying an ``error_detail``."""
        return [
            r
            for r in self.requests
            if r.message.HasField("error_detail") and (type_url is None or r.type_url == type_url)
        ]

    def _handlers(self) -> list[grpc.GenericRpcHandler]:
        """The gRPC services, to serve them from another server (tests/conformance/servers)."""
        return self._grpc.handlers()

    # ------------------------------------------------------------------ REST-JSON and files

    async def serve_rest(
        self,
        *,
        long_poll: bool = False,
        hold: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> RestEndpoint:
        """Serve the same resources over REST-JSON polling too (needs ``xdsclient[rest]``);
        the endpoint's ``url`` goes in a `RestSource`. With ``long_poll`` a request whose
        version is current is held until something changes (at most ``hold`` seconds)."""
        if self._rest is None:
            self._rest = RestEndpoint(
                self._store,
                self._journal,
                paused=lambda: self.paused,
                long_poll=long_poll,
                hold=hold,
                ssl_context=ssl_context,
            )
            await self._rest.start()
        return self._rest

    def write_file(self, path: str | os.PathLike[str], type_url: str) -> str:
        """Write every resource of a type as one DiscoveryResponse to ``path`` (the format
        follows the extension, as for a `FileSource`), atomically: a temporary file renamed
        over it. Returns the version written."""
        target = os.fspath(path)
        response, names = self._store.snapshot(type_url, None)
        self._journal.sent(
            SentResponse(time=time.monotonic(), stream=0, type_url=type_url, nonce="", names=names)
        )
        data = dump_response(response, format_of(target))
        directory = os.path.dirname(os.path.abspath(target))
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".xds-", suffix=".tmp")
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, target)
        version: str = response.version_info
        return version
