"""One management server or source as the pool uses it: a transport, and one discovery stream
(a `Session` and the `StreamDriver` that owns it) per stream spec; and, apart, one server's load
reporting stream (`LoadChannel`).

Why apart: the pool routes and decides; this is what it routes to. Every change to a session
goes through its driver (`StreamDriver.command`): subscriptions, and the entries a session
takes over from another server's session when it becomes an authority's writer (gRFC A71). The
driver's events come back through one `StreamEvents` object per stream (`DiscoveryEvents`),
which tells the pool (fallback, what may be published) and the stream's `DiscoveryReporter`
(observers), in that order.

Load reporting is a user of its server beside discovery, not a part of its discovery channel
(as C-core's LRS client keeps its own channel over a shared transport): the pool keeps one
`LoadChannel` per LRS server while something is to be reported there, on the same transport as
the discovery channel, so a discovery channel released after fallback leaves the LRS stream
up, and a discovery channel opened again does not open a second one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from typing import Any, Protocol

from envoy.service.load_stats.v3 import lrs_pb2

from .._errors import TransportError
from .._observe._events import LoadReportingChanged, Observers
from .._protocol import Event, ProtocolOptions, Session, SessionWriter
from .._protocol._cache import CacheEntry, Table
from .._protocol._load_store import LoadStore
from .._protocol._lrs import LRS_METHOD, LoadReporting
from .._runtime._clock import Clock
from .._runtime._tasks import TaskOwner
from .._settings._config import Backoff, ServerConfig
from .._settings._sources import Source
from .._transports import StreamSpec, Transport
from ..resources import ResourceType
from ._driver import StreamDriver
from ._reporter import DiscoveryReporter

__all__ = [
    "LRS_SPEC",
    "Channel",
    "ChannelOwner",
    "DiscoveryEvents",
    "LoadChannel",
    "LoadChannelOwner",
    "LoadReportingEvents",
]

#: The LRS stream: requests are protobuf messages, responses decoded as `LoadStatsResponse`
#: (the shell opens it: the protocol's `LoadReporting` knows no transport).
LRS_SPEC = StreamSpec.of_method(
    LRS_METHOD, response_deserializer=lrs_pb2.LoadStatsResponse.FromString
)


class ChannelOwner(Protocol):
    """What a channel's streams tell the pool."""

    def failed(self, channel: Channel, error: TransportError) -> None:
        """A stream of ``channel`` failed before any response."""
        ...

    def answered(self, channel: Channel) -> None:
        """A stream of ``channel`` read a response (not yet applied)."""
        ...

    def publish_from(
        self, channel: Channel, events: list[Event], after: asyncio.Future[None] | None
    ) -> asyncio.Future[None] | None:
        """Deliver what ``channel`` may deliver of ``events``."""
        ...


class LoadChannelOwner(Protocol):
    """What a load reporting stream tells the pool."""

    def reported(self, server: ServerConfig) -> None:
        """A report was written to ``server`` (nothing may be left to report there)."""
        ...


class Channel:
    """One server or source: its transport, and the driver of each type's stream."""

    def __init__(self, server: Source, transport: Transport) -> None:
        self.server = server
        self.transport = transport
        self.drivers: dict[str, StreamDriver[Session]] = {}  # type URL -> its stream's driver
        self.tasks = TaskOwner()
        #: whether the pool let go of the (shared) transport
        self.released = False

    def start(
        self,
        streams: Iterable[tuple[StreamSpec, list[ResourceType[Any]]]],
        *,
        node: Any,
        options: ProtocolOptions,
        clock: Clock,
        backoff: Backoff,
        polling: bool,
        observers: Observers,
        owner: ChannelOwner,
    ) -> None:
        """Make a session and a driver for each of ``streams`` and start the drivers."""
        for spec, types in streams:
            session = Session(node=node, resource_types=types, delta=spec.delta, options=options)
            reporter = DiscoveryReporter(
                session=session, server=self.server.uri, observers=observers
            )
            driver = StreamDriver(
                protocol=session,
                transport=self.transport,
                spec=spec,
                server=self.server.uri,
                clock=clock,
                events=DiscoveryEvents(owner, self, reporter),
                backoff=backoff,
                polling=polling,
            )
            for rtype in types:
                self.drivers[rtype.type_url] = driver
            self.tasks.start(driver.run(), name=f"xdsclient {spec} {self.server.uri}")

    # ------------------------------------------------------------------ commands

    def subscribe(self, type_url: str, names: Collection[str]) -> None:
        """Want ``names`` of ``type_url`` on this server."""

        def want(session: SessionWriter) -> None:
            session.subscribe_all(type_url, names)

        self.drivers[type_url].command(want)

    def unsubscribe(self, type_url: str, names: Collection[str]) -> None:
        """Stop wanting ``names`` of ``type_url`` on this server."""

        def drop(session: SessionWriter) -> None:
            for name in names:
                session.unsubscribe(type_url, name)

        self.drivers[type_url].command(drop)

    def adopt(self, type_url: str, entries: list[tuple[str, CacheEntry]]) -> None:
        """Take another server's ``entries`` of ``type_url`` (for the names wanted here)."""

        def take(session: SessionWriter) -> None:
            for name, entry in entries:
                session.adopt(type_url, name, entry)

        self.drivers[type_url].command(take)

    def table(self, type_url: str) -> Table:
        """This server's table of ``type_url``: what the cache reads while it is the writer."""
        return self.drivers[type_url].protocol.table(type_url)


class DiscoveryEvents:
    """The `StreamEvents` of one discovery stream: the pool first (it may hand an authority
    over before the session sees the response or failure), then the reporter."""

    __slots__ = ("_channel", "_owner", "_reporter")

    def __init__(self, owner: ChannelOwner, channel: Channel, reporter: DiscoveryReporter) -> None:
        self._owner = owner
        self._channel = channel
        self._reporter = reporter

    def on_open(self, now: float) -> None:
        self._reporter.opened(now)

    def on_request(self, request: Any, now: float) -> None:
        self._reporter.request(request, now)

    def on_response(self, response: Any, now: float) -> None:
        self._owner.answered(self._channel)
        self._reporter.response(response, now)

    def on_applied(self, response: Any, now: float) -> None:
        self._reporter.applied(response, now)

    def on_failure(self, error: TransportError, now: float) -> None:
        self._owner.failed(self._channel, error)
        self._reporter.failed(error, now)

    def publish(
        self, events: list[Event], after: asyncio.Future[None] | None = None
    ) -> asyncio.Future[None] | None:
        return self._owner.publish_from(self._channel, events, after)


class LoadChannel:
    """One LRS server's load reporting stream: its driver over the server's shared transport,
    reporting ``store``."""

    def __init__(
        self,
        server: ServerConfig,
        transport: Transport,
        store: LoadStore,
        *,
        node: Any,
        clock: Clock,
        backoff: Backoff,
        events: LoadReportingEvents,
    ) -> None:
        self.server = server
        self.transport = transport
        self.store = store
        self.driver = StreamDriver(
            protocol=LoadReporting(node=node, store=store),
            transport=transport,
            spec=LRS_SPEC,
            server=server.uri,
            clock=clock,
            events=events,
            backoff=backoff,
            label="LRS",
        )
        self.tasks = TaskOwner()
        self.tasks.start(self.driver.run(), name=f"xdsclient LRS {server.uri}")
        #: whether the pool let go of the (shared) transport
        self.released = False

    def wake(self) -> None:
        """The store changed from outside the stream (a load moved here): look again."""
        self.driver.command(lambda protocol: None)


class LoadReportingEvents:
    """The `StreamEvents` of an LRS stream: its state for observers, on changes only (a
    server that stays down is one ``failing``, not one per retry), and each report written to
    the pool, which ends the stream once nothing is left to report there."""

    __slots__ = ("_observers", "_owner", "_server", "_state")

    def __init__(self, server: ServerConfig, observers: Observers, owner: LoadChannelOwner) -> None:
        self._server = server
        self._observers = observers
        self._owner = owner
        self._state = ""

    def on_open(self, now: float) -> None:
        if self._state != "failing":  # a retry of a failing stream is still failing
            self._change("connecting", None, now)

    def on_request(self, request: Any, now: float) -> None:
        if not request.HasField("node"):  # a report, not the stream's first request
            self._owner.reported(self._server)

    def on_response(self, response: Any, now: float) -> None:
        self._change("reporting", None, now)

    def on_applied(self, response: Any, now: float) -> None:
        pass

    def on_failure(self, error: TransportError, now: float) -> None:
        self._change("failing", lrs_reason(error, self._server.uri), now)

    def publish(self, events: list[Any], after: Any = None) -> None:
        return None

    def closed(self, now: float) -> None:
        """The stream was ended on purpose: nothing left to report, or the client closed."""
        self._change("closed", None, now)

    def _change(self, state: str, error: str | None, now: float) -> None:
        if state == self._state:
            return
        self._state = state
        if self._observers:
            self._observers.emit(
                LoadReportingChanged(server=self._server.uri, time=now, state=state, error=error)
            )


def lrs_reason(error: TransportError, server: str) -> str:
    """Why an LRS stream ended, without the transport's words for a discovery stream."""
    text = str(error)
    prefix = f"xDS stream to {server} failed: "
    return text[len(prefix) :] if text.startswith(prefix) else text
