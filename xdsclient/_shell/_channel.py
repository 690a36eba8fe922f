"""One management server or source as the pool uses it: a transport, and one discovery stream
(a `Session` and the `StreamDriver` that owns it) per stream spec.

Why apart: the pool routes and decides; this is what it routes to. Every change to a session
goes through its driver (`StreamDriver.command`): subscriptions, and the entries a session
takes over from another server's session when it becomes an authority's writer (gRFC A71). The
driver's events come back through one `StreamEvents` object per stream (`DiscoveryEvents`),
which tells the pool (fallback, what may be published) and the stream's `DiscoveryReporter`
(observers), in that order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from typing import Any, Protocol

from envoy.service.load_stats.v3 import lrs_pb2

from .._errors import TransportError
from .._observe._events import Observers
from .._protocol import Event, ProtocolOptions, Session, SessionWriter
from .._protocol._cache import CacheEntry, Table
from .._protocol._load_store import LoadStore
from .._protocol._lrs import LRS_METHOD, LoadReporting, LoadReportingEvents
from .._runtime._clock import Clock
from .._runtime._tasks import TaskOwner
from .._settings._config import Backoff
from .._settings._sources import Source
from .._transports import StreamSpec, Transport
from ..resources import ResourceType
from ._driver import StreamDriver
from ._reporter import DiscoveryReporter

__all__ = ["LRS_SPEC", "Channel", "ChannelOwner", "DiscoveryEvents"]

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


class Channel:
    """One server or source: its transport, and the driver of each type's stream."""

    def __init__(self, server: Source, transport: Transport) -> None:
        self.server = server
        self.transport = transport
        self.drivers: dict[str, StreamDriver[Session]] = {}  # type URL -> its stream's driver
        #: the one load reporting (LRS) stream to this server, once something is reported
        self.load_reporting: StreamDriver[LoadReporting] | None = None
        self.tasks = TaskOwner()

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

    def report_load(self, store: LoadStore, *, node: Any, clock: Clock, backoff: Backoff) -> None:
        """Open the LRS stream reporting ``store`` on this server's transport (once)."""
        if self.load_reporting is not None:
            return
        driver = StreamDriver(
            protocol=LoadReporting(node=node, store=store),
            transport=self.transport,
            spec=LRS_SPEC,
            server=self.server.uri,
            clock=clock,
            events=LoadReportingEvents(),
            backoff=backoff,
        )
        self.load_reporting = driver
        self.tasks.start(driver.run(), name=f"xdsclient LRS {self.server.uri}")

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
