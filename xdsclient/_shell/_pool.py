"""The servers a client talks to: one channel per management server or source, authorities
routed over them, fallback between an authority's servers carried out (gRFC A47, A71).

Why one place: every subscription takes the path name -> authority -> the authority's servers
-> the channel of each (`_channel.py`), or type -> its file or REST source. A server listed by
several authorities gets one channel, shared, and is closed when no authority uses it any more.

Decide, then act: which server serves an authority is decided by `Authorities`
(`_authorities.py`, pure: events in, actions out); this pool feeds it the events (a
subscription from the client, a stream's failure or response from a channel) and carries out
the actions it returns, in order, in `_carry_out` and nowhere else. It runs synchronously in
the step that caused it: a hand-over caused by a response is done before the session applies
that response, so the response is applied against what watchers last saw.

One writer per authority: the cache reads an authority's tables from the session of its active
server only (`HandOver`), and a channel publishes only the events of names whose authority it
writes, so watchers see one consistent source. A channel that was closed publishes nothing, and
its late failures and responses change nothing, even once a new channel to the same server
was opened.

Load reporting (gRFC A27) is a user of its server beside discovery: one `LoadChannel` per LRS
server while something is to be reported there, sharing the server's transport with its
discovery channel (a transport closes when neither uses it). A `ClusterLoad` is one object per
(cluster, EDS service) for the life of the pool, reported to the server its cluster comes from
(``lrs_server: self``): the authority's active server. When an authority is handed over
(fallback, return), its loads move with it; what a load counted since its last report stays
with the server it leaves, which receives it in its next report; then, with nothing left to
report there, that server's LRS stream ends (as C-core's LRS client stops a call without
stats).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Any, Protocol

from .._errors import TransportError
from .._names import OLD_AUTHORITY, authority_of
from .._observe._events import ChannelClosed, Observers
from .._observe._logs import authority_words
from .._protocol import Event, ResourceCache, ResourceStatus
from .._protocol._load_store import ClusterLoad, LoadStore
from .._protocol._services import PER_TYPE_SERVICES
from .._runtime._clock import Clock
from .._runtime._tasks import TaskOwner
from .._settings._config import Backoff, ClientConfig, ServerConfig
from .._settings._options import ClientOptions
from .._settings._sources import FileSource, RestSource, Source
from .._transports import StreamSpec, Transport, TransportFactory, transport_for
from .._xdstp import XDSTP_PREFIX
from ..resources import CLUSTER, ResourceType
from ._authorities import (
    Action,
    Authorities,
    Close,
    HandOver,
    Reason,
    Subscribe,
    Unsubscribe,
)
from ._channel import Channel, LoadChannel, LoadReportingEvents

__all__ = ["Publish", "ServerPool"]

logger = logging.getLogger("xdsclient.fallback")

#: A file source reopens only once the file changed: no backoff is needed between attempts.
_FILE_BACKOFF = Backoff(initial=0.01, multiplier=1.0, jitter=0.0, maximum=0.01)

#: Statuses that count as cached for gRFC A71: a usable value, or known not to exist.
_KNOWN = frozenset({ResourceStatus.DOES_NOT_EXIST, ResourceStatus.TIMEOUT, ResourceStatus.EXPIRED})


class Publish(Protocol):
    """Hands a batch of events to the watchers now; returns what completes once they saw it.
    ``after``: the watchers are called only once it is done (the ACK written), or after a
    short bound (a stream that cannot write must not hold up the watchers)."""

    def __call__(
        self, events: list[Event], after: asyncio.Future[None] | None = None
    ) -> asyncio.Future[None] | None: ...


class ServerPool:
    """Channels by server, authorities by name; the only path to a session."""

    def __init__(
        self,
        *,
        config: ClientConfig,
        options: ClientOptions,
        types: dict[str, ResourceType[Any]],
        cache: ResourceCache,
        clock: Clock,
        publish: Publish,
        tasks: TaskOwner,
        transport: TransportFactory | None,
        observers: Observers | None = None,
    ) -> None:
        self._config = config
        self._observers = observers if observers is not None else Observers()
        self._options = options
        self._types = types
        self._cache = cache
        self._clock = clock
        self._publish = publish
        self._tasks = tasks
        self._factory = transport
        self._channels: dict[Source, Channel] = {}
        #: type URL -> the file or REST source serving it instead of the servers
        self._sources: dict[str, Source] = dict(config.sources)
        self._closing: list[Channel] = []  # released channels whose tasks are ending
        #: server -> its transport and how many channels use it (discovery, load reporting)
        self._transports: dict[Source, tuple[Transport, int]] = {}
        #: (cluster, EDS service) -> its load, kept for the life of the pool, and its server
        self._loads: dict[tuple[str, str], ClusterLoad] = {}
        self._load_servers: dict[tuple[str, str], ServerConfig] = {}
        #: LRS server -> what is (still) reported to it, and its stream while it has any
        self._load_stores: dict[ServerConfig, LoadStore] = {}
        self._load_channels: dict[ServerConfig, tuple[LoadChannel, LoadReportingEvents]] = {}
        self._load_closing: list[LoadChannel] = []
        self._authorities = Authorities(config.servers_of)
        self._act: dict[type, Callable[[Any], None]] = {
            Subscribe: self._subscribe,
            Unsubscribe: self._unsubscribe,
            HandOver: self._hand_over,
            Close: self._close,
        }

    # ------------------------------------------------------------------ routing

    def knows(self, authority: str, type_url: str | None = None) -> bool:
        """Whether a name of ``authority`` (and type) can be fetched: its type has a source, or
        the bootstrap configures servers for the authority."""
        if type_url is not None and type_url in self._sources:
            return True
        return bool(self._config.servers_of(authority))

    def check_type(self, type_url: str) -> None:
        """Raise when no stream of this client carries ``type_url``."""
        if not self._options.ads and type_url not in self._carried_per_type():
            variant = "Delta" if self._options.delta else "SotW"
            raise ValueError(f"no {variant} per-type service carries {type_url}")

    def subscribe(self, type_url: str, name: str) -> None:
        """Want ``name`` from its type's source, or on every server of its authority down to
        the active one."""
        self.subscribe_all(type_url, authority_of(name), (name,))

    def subscribe_all(self, type_url: str, authority_name: str, names: Collection[str]) -> None:
        """`subscribe` to ``names``, all of ``authority_name``: one call per driver however many
        names a walk adds."""
        source = self._sources.get(type_url)
        if source is not None:
            channel = self._source_channel(source)
            self._cache.assign(authority_name, type_url, channel.table(type_url))
            channel.subscribe(type_url, names)
            return
        self._carry_out(self._authorities.subscribe(authority_name, type_url, names, self._cached))

    def unsubscribe(self, type_url: str, name: str) -> None:
        source = self._sources.get(type_url)
        if source is not None:
            self._channels[source].unsubscribe(type_url, (name,))
            return
        self._carry_out(self._authorities.unsubscribe(authority_of(name), type_url, name))

    def load_reporter(self, cluster: str, service: str) -> ClusterLoad:
        """The load of ``(cluster, service)``: one object for the life of the pool, reported
        to the server ``cluster`` comes from (``lrs_server: self``: its authority's active
        server, which changes with fallback and return) on that server's one LRS stream."""
        key = (cluster, service)
        load = self._loads.get(key)
        if load is not None:
            return load
        authority = authority_of(cluster)
        if self._sources.get(CLUSTER.type_url) is not None:
            raise ValueError(f"cluster {cluster} comes from a source, not a server: no LRS")
        server = self._authorities.active(authority) or next(
            iter(self._config.servers_of(authority) or ()), None
        )
        if server is None:
            raise ValueError(f"no server serves cluster {cluster}: no LRS")
        load = self._loads[key] = ClusterLoad(cluster, service, self._clock.time())
        self._load_servers[key] = server
        self._load_store(server).add(load)
        self._load_channel(server).wake()
        return load

    def reported(self, server: ServerConfig) -> None:
        """A report went to ``server``: its LRS stream ends once nothing is left there."""
        if not self._load_stores.get(server):
            self._end_load_reporting(server)

    def _move_loads(self, authority: str, target: ServerConfig) -> None:
        """The loads of ``authority``'s clusters now report to ``target``; what each counted
        since its last report stays with the server it leaves, for its next report."""
        now, left = self._clock.time(), set()
        for key, load in self._loads.items():
            source = self._load_servers[key]
            if source == target or authority_of(key[0]) != authority:
                continue
            self._load_stores[source].remove(*key, now)
            self._load_servers[key] = target
            self._load_store(target).add(load)
            left.add(source)
        if not left:
            return
        self._load_channel(target).wake()
        for source in left:
            if self._load_stores[source]:
                self._load_channel(source).wake()
            else:
                self._end_load_reporting(source)

    def _load_store(self, server: ServerConfig) -> LoadStore:
        store = self._load_stores.get(server)
        if store is None:
            store = self._load_stores[server] = LoadStore()
        return store

    def _load_channel(self, server: ServerConfig) -> LoadChannel:
        """The LRS stream to ``server``, opened on first use."""
        entry = self._load_channels.get(server)
        if entry is None:
            events = LoadReportingEvents(server, self._observers, self)
            channel = LoadChannel(
                server,
                self._acquire(server),
                self._load_store(server),
                node=self._config.node.to_proto(),
                clock=self._clock,
                backoff=self._options.backoff,
                events=events,
            )
            entry = self._load_channels[server] = (channel, events)
        return entry[0]

    def _end_load_reporting(self, server: ServerConfig) -> None:
        entry = self._load_channels.pop(server, None)
        if not self._load_stores.get(server):
            self._load_stores.pop(server, None)
        if entry is None:
            return
        channel, events = entry
        self._load_closing.append(channel)
        events.closed(self._clock.time())
        self._tasks.start(self._stop_load(channel), name=f"xdsclient close LRS {server.uri}")

    async def _stop_load(self, channel: LoadChannel) -> None:
        await channel.tasks.close()
        await self._release(channel)
        if channel in self._load_closing:
            self._load_closing.remove(channel)

    def _acquire(self, server: Source) -> Transport:
        """The transport to ``server``, shared by its discovery and load reporting channels."""
        transport, users = self._transports.get(server) or (
            transport_for(server, self._options, clock=self._clock, factory=self._factory),
            0,
        )
        self._transports[server] = (transport, users + 1)
        return transport

    async def _release(self, user: Channel | LoadChannel) -> None:
        """``user`` is done with its transport (once, however often it is stopped): the
        transport is closed once nobody uses it."""
        if user.released:
            return
        user.released = True
        server, transport = user.server, user.transport
        entry = self._transports.get(server)
        if entry is not None and entry[0] is transport:
            if entry[1] > 1:
                self._transports[server] = (transport, entry[1] - 1)
                return
            del self._transports[server]
        await transport.close()

    async def close(self) -> None:
        """Stop every channel, the released ones included, and wait for them."""
        channels = [*self._channels.values(), *self._closing]
        self._channels, self._closing = {}, []
        loads = [*self._load_channels.values()]
        closing, self._load_channels, self._load_closing = self._load_closing, {}, []
        for channel in channels:
            await self._stop(channel)
        for load_channel, events in loads:
            events.closed(self._clock.time())
            await self._stop_load(load_channel)
        for load_channel in closing:
            await self._stop_load(load_channel)

    # ------------------------------------------------------------------ what channels tell

    def failed(self, channel: Channel, error: TransportError) -> None:
        """A stream of ``channel`` failed before any response: fall back where gRFC A71 says."""
        if self._current(channel) and isinstance(channel.server, ServerConfig):
            self._carry_out(self._authorities.failed(channel.server, self._cached))

    def answered(self, channel: Channel) -> None:
        """A response on ``channel``: it takes back what it stands by for."""
        if self._current(channel) and isinstance(channel.server, ServerConfig):
            self._carry_out(self._authorities.answered(channel.server))

    def publish_from(
        self, channel: Channel, events: list[Event], after: asyncio.Future[None] | None
    ) -> asyncio.Future[None] | None:
        """``events`` less those of names whose authority ``channel`` does not write: one it
        stands by for, one that left it, one it never served (an ``xdstp://b/...`` resource
        that came through the wildcard of another authority); all of them once it is closed.
        A file or REST source serves its types for every authority."""
        server = channel.server
        if events and isinstance(server, ServerConfig):
            writes = self._authorities.writes(server) if self._current(channel) else set()
            sourced = self._sources  # types whose source serves them for every authority
            events = _written(events, writes, sourced.keys())
        return self._publish(events, after)

    def _current(self, channel: Channel) -> bool:
        return self._channels.get(channel.server) is channel

    # ------------------------------------------------------------------ carrying out

    def _carry_out(self, actions: list[Action]) -> None:
        act = self._act
        for action in actions:
            act[type(action)](action)

    def _subscribe(self, action: Subscribe) -> None:
        self._channel(action.server).subscribe(action.type_url, action.names)

    def _unsubscribe(self, action: Unsubscribe) -> None:
        self._channels[action.server].unsubscribe(action.type_url, action.names)

    def _hand_over(self, action: HandOver) -> None:
        """The target takes the source's entries of the authority, then becomes its writer."""
        authority, target = action.authority, self._channel(action.target)
        if action.source is not None:
            source = self._channels[action.source]
            self._log_hand_over(action)
            for type_url in action.types:
                if type_url in target.drivers:
                    target.adopt(type_url, _entries_of(authority, source.table(type_url)))
        for type_url in target.drivers:
            self._cache.assign(authority, type_url, target.table(type_url))
        self._move_loads(authority, action.target)

    def _close(self, action: Close) -> None:
        channel = self._channels.pop(action.server)
        self._closing.append(channel)
        self._tasks.start(self._stop(channel), name=f"xdsclient close {channel.server.uri}")

    def _log_hand_over(self, action: HandOver) -> None:
        assert action.source is not None
        if action.reason is Reason.FALLBACK:
            logger.warning(
                "xDS server %s unreachable with resources missing: falling back to %s for %s",
                action.source.uri,
                action.target.uri,
                authority_words(action.authority),
            )
        else:
            logger.warning(
                "xDS server %s answers again: going back to it from %s for %s",
                action.target.uri,
                action.source.uri,
                authority_words(action.authority),
            )

    def _cached(self, authority: str, type_url: str, names: Collection[str]) -> bool:
        """gRFC A71: whether every one of ``names`` has a usable value or is known absent."""
        table = self._cache.table(authority, type_url) or {}
        for name in names:
            entry = table.get(name)
            if entry is None or not (entry.status.holds_value or entry.status in _KNOWN):
                return False
        return True

    # ------------------------------------------------------------------ channels

    def _channel(self, server: Source) -> Channel:
        """The channel of ``server``, opened on first use."""
        channel = self._channels.get(server)
        if channel is None:
            channel = self._channels[server] = self._open(server)
        return channel

    def _source_channel(self, source: Source) -> Channel:
        return self._channel(source)

    def _open(self, server: Source) -> Channel:
        channel = Channel(server, self._acquire(server))
        channel.start(
            self._streams(server),
            node=self._config.node.to_proto(),
            options=self._options.protocol(
                ignore_resource_deletion=isinstance(server, ServerConfig)
                and server.ignore_resource_deletion,
                complete_state=isinstance(server, FileSource),
                resource_timer_is_transient_failure=isinstance(server, ServerConfig)
                and server.resource_timer_is_transient_failure,
            ),
            clock=self._clock,
            backoff=_FILE_BACKOFF if isinstance(server, FileSource) else self._options.backoff,
            polling=isinstance(server, RestSource),
            observers=self._observers,
            owner=self,
        )
        return channel

    async def _stop(self, channel: Channel) -> None:
        """End the channel's drivers, then its transport; then observers hear it is closed
        (after the drivers, so no event of theirs can say it is connected again)."""
        await channel.tasks.close()
        await self._release(channel)
        if channel in self._closing:
            self._closing.remove(channel)
        if self._observers:
            self._observers.emit(ChannelClosed(server=channel.server.uri, time=self._clock.time()))

    def _streams(self, server: Source) -> list[tuple[StreamSpec, list[ResourceType[Any]]]]:
        """The streams to a server: one ADS stream for every type it serves, or one stream per
        type; a file or REST source: one SotW stream per type it serves."""
        if not isinstance(server, ServerConfig):
            return [
                (StreamSpec(type_url=url, delta=False), [self._types[url]])
                for url, source in self._sources.items()
                if source == server and url in self._types
            ]
        delta = self._options.delta
        # A server carries every type without a source, and the types whose source it is.
        served = [t for url, t in self._types.items() if self._sources.get(url, server) == server]
        if self._options.ads:
            return [(StreamSpec(type_url=None, delta=delta), served)] if served else []
        carried = set(self._carried_per_type())
        return [
            (StreamSpec(type_url=t.type_url, delta=delta), [t])
            for t in served
            if t.type_url in carried
        ]

    def _carried_per_type(self) -> list[str]:
        delta = self._options.delta
        return [
            url
            for url in self._types
            if delta or PER_TYPE_SERVICES[url].sotw_method is not None  # VHDS is Delta only
        ]


def _entries_of(authority: str, table: Any) -> list[tuple[str, Any]]:
    """The entries of ``table`` whose names belong to ``authority``."""
    return [(name, entry) for name, entry in table.items() if authority_of(name) == authority]


def _written(events: list[Event], writes: Collection[str], sourced: Collection[str]) -> list[Event]:
    """The events of names of an authority in ``writes`` (or of a type in ``sourced``). An
    old-style name's authority needs no call: every name of a response costs one test."""
    old = OLD_AUTHORITY in writes
    return [
        e
        for e in events
        if (old and not e.name.startswith(XDSTP_PREFIX))
        or authority_of(e.name) in writes
        or e.type_url in sourced
    ]
