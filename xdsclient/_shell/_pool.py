"""The servers a client talks to: one channel per management server, authorities routed over
them, fallback between an authority's servers (gRFC A47, A71).

Why one place: every subscription takes the path name -> authority -> the authority's servers
-> the channel (transport and stream drivers) of each. A server listed by several authorities
gets one channel, shared, and is closed when no authority uses it any more.

Fallback (gRFC A71), decided synchronously in the drivers' callbacks, before the session sees
the failure or response that caused it:
- An authority's servers are in priority order; ``active`` is the one whose session writes the
  authority's tables in the cache. Every server above it stays subscribed (it keeps retrying).
- When the active server has a connectivity failure (a stream failed before any response) and
  a watched resource of the authority is not cached (no usable value, and not known not to
  exist), the next server becomes active: it is subscribed to everything the authority watches
  and adopts the cached entries, so watchers see only real changes. Watchers hear of the failure
  only from the last server: events of a server that is not an authority's writer are dropped.
- A response from a higher-priority server makes it active again at once (before that response
  is applied): it adopts the entries, and the servers below it drop the authority's names and
  are closed when unused.
- A new watch while the active server is failing re-checks the rule.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Any

from .._config import Backoff, ClientConfig, ServerConfig
from .._errors import TransportError
from .._logs import authority_words
from .._names import WILDCARD, authority_of
from .._observe import ChannelClosed, Observers
from .._options import ClientOptions
from .._protocol import Event, ResourceCache, ResourceStatus, Session
from .._services import PER_TYPE_SERVICES
from .._sources import FileSource, RestSource, Source
from .._transports import StreamSpec, Transport, TransportFactory, transport_for
from ..resources import ResourceType
from ._clock import Clock
from ._driver import Publish, StreamDriver
from ._tasks import TaskOwner

__all__ = ["ServerPool"]

logger = logging.getLogger("xdsclient.fallback")

#: A file source reopens only once the file changed: no backoff is needed between attempts.
_FILE_BACKOFF = Backoff(initial=0.01, multiplier=1.0, jitter=0.0, maximum=0.01)

#: Statuses that count as cached for gRFC A71: a usable value, or known not to exist.
_KNOWN = frozenset({ResourceStatus.DOES_NOT_EXIST, ResourceStatus.TIMEOUT, ResourceStatus.EXPIRED})


class _Channel:
    """One management server: its transport, sessions and drivers, and who uses it."""

    def __init__(self, server: Source, transport: Transport) -> None:
        self.server = server
        self.transport = transport
        self.sessions: dict[str, Session] = {}  # type URL -> the session carrying it
        self.drivers: dict[str, StreamDriver] = {}  # type URL -> the driver of its stream
        self.tasks = TaskOwner()
        self.users: set[str] = set()  # authorities subscribed here (active or standby)
        self.standby: set[str] = set()  # authorities subscribed here that another server writes
        self.failing = False  # the last stream failed before any response


class _Authority:
    """One authority: its servers in priority order, which is active, what it watches."""

    def __init__(self, name: str, servers: tuple[ServerConfig, ...]) -> None:
        self.name = name
        self.servers = servers
        self.active = 0
        self.watched: dict[str, set[str]] = {}  # type URL -> names (the wildcard included)


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
        self._channels: dict[Source, _Channel] = {}
        #: type URL -> the file or REST source serving it instead of the servers
        self._sources: dict[str, Source] = dict(config.sources)
        self._closing: list[_Channel] = []  # released channels whose tasks are ending
        self._authorities: dict[str, _Authority] = {}

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
            self._cache.assign(authority_name, type_url, channel.sessions[type_url].table(type_url))
            channel.drivers[type_url].subscribe_all(type_url, names)
            return
        authority = self._authority(authority_name)
        authority.watched.setdefault(type_url, set()).update(names)
        for index in range(authority.active + 1):
            self._channel_for(authority, index).drivers[type_url].subscribe_all(type_url, names)
        active = self._channels[authority.servers[authority.active]]
        if active.failing:
            self._maybe_fall_back(authority, active)

    def unsubscribe(self, type_url: str, name: str) -> None:
        source = self._sources.get(type_url)
        if source is not None:
            self._channels[source].drivers[type_url].unsubscribe(type_url, name)
            return
        authority = self._authorities[authority_of(name)]
        authority.watched.get(type_url, set()).discard(name)
        for index in range(authority.active + 1):
            channel = self._channels[authority.servers[index]]
            channel.drivers[type_url].unsubscribe(type_url, name)

    async def close(self) -> None:
        """Stop every channel, the released ones included, and wait for them."""
        channels = [*self._channels.values(), *self._closing]
        self._channels, self._closing = {}, []
        for channel in channels:
            await self._stop(channel)

    # ------------------------------------------------------------------ authorities

    def _authority(self, name: str) -> _Authority:
        authority = self._authorities.get(name)
        if authority is None:
            servers = self._config.servers_of(name)
            if servers is None:
                raise ValueError(f"the bootstrap does not configure the authority {name!r}")
            authority = self._authorities[name] = _Authority(name, servers)
            channel = self._channel_for(authority, 0)
            for type_url in self._types:
                if type_url in channel.sessions:
                    self._cache.assign(name, type_url, channel.sessions[type_url].table(type_url))
        return authority

    def _channel_for(self, authority: _Authority, index: int) -> _Channel:
        """The channel of the authority's ``index``-th server, made on first use."""
        server = authority.servers[index]
        channel = self._channels.get(server)
        if channel is None:
            channel = self._channels[server] = self._open(server)
        channel.users.add(authority.name)
        return channel

    def _maybe_fall_back(self, authority: _Authority, channel: _Channel) -> None:
        """gRFC A71: the active server failed; move on if something watched is not cached."""
        if authority.servers[authority.active] != channel.server:
            return
        if authority.active + 1 >= len(authority.servers) or not self._uncached(authority):
            return
        previous = channel
        authority.active += 1
        target = self._channel_for(authority, authority.active)
        previous.standby.add(authority.name)
        target.standby.discard(authority.name)
        logger.warning(
            "xDS server %s unreachable with resources missing: falling back to %s for %s",
            previous.server.uri,
            target.server.uri,
            authority_words(authority.name),
        )
        for type_url, names in authority.watched.items():
            target.drivers[type_url].subscribe_all(type_url, names)
        self._hand_over(authority, previous, target)
        if target.failing:
            self._maybe_fall_back(authority, target)

    def _uncached(self, authority: _Authority) -> bool:
        for type_url, names in authority.watched.items():
            table = self._cache.table(authority.name, type_url) or {}
            for name in names:
                if name == WILDCARD:
                    continue
                entry = table.get(name)
                if entry is None or not (entry.status.holds_value or entry.status in _KNOWN):
                    return True
        return False

    def _switch_back(self, channel: _Channel) -> None:
        """A response from ``channel``: it serves again every authority it stands by for."""
        for name in list(channel.standby):
            authority = self._authorities[name]
            index = authority.servers.index(channel.server)
            current = self._channels[authority.servers[authority.active]]
            logger.warning(
                "xDS server %s answers again: going back to it from %s for %s",
                channel.server.uri,
                current.server.uri,
                authority_words(name),
            )
            self._hand_over(authority, current, channel)
            for lower in authority.servers[index + 1 : authority.active + 1]:
                self._leave(authority, self._channels[lower])
            authority.active = index
            channel.standby.discard(name)

    def _hand_over(self, authority: _Authority, source: _Channel, target: _Channel) -> None:
        """``target`` becomes the writer of ``authority``'s tables, starting from ``source``'s."""
        for type_url, session in target.sessions.items():
            if type_url in authority.watched:
                for name, entry in list(source.sessions[type_url].table(type_url).items()):
                    if authority_of(name) == authority.name:
                        session.adopt(type_url, name, entry)
            self._cache.assign(authority.name, type_url, session.table(type_url))

    def _leave(self, authority: _Authority, channel: _Channel) -> None:
        """``authority`` stops using ``channel``; the channel closes when nobody uses it."""
        for type_url, names in authority.watched.items():
            for name in names:
                channel.drivers[type_url].unsubscribe(type_url, name)
        channel.users.discard(authority.name)
        channel.standby.discard(authority.name)
        if not channel.users:
            del self._channels[channel.server]
            self._closing.append(channel)
            self._tasks.start(self._stop(channel), name=f"xdsclient close {channel.server.uri}")

    # ------------------------------------------------------------------ channels

    def _source_channel(self, source: Source) -> _Channel:
        channel = self._channels.get(source)
        if channel is None:
            channel = self._channels[source] = self._open(source)
        return channel

    def _open(self, server: Source) -> _Channel:
        channel = _Channel(
            server, transport_for(server, self._options, clock=self._clock, factory=self._factory)
        )
        for spec, types in self._streams(server):
            session = Session(
                node=self._config.node.to_proto(),
                resource_types=types,
                delta=spec.delta,
                options=self._options.protocol(
                    ignore_resource_deletion=isinstance(server, ServerConfig)
                    and server.ignore_resource_deletion,
                    complete_state=isinstance(server, FileSource),
                    resource_timer_is_transient_failure=isinstance(server, ServerConfig)
                    and server.resource_timer_is_transient_failure,
                ),
            )
            driver = StreamDriver(
                session=session,
                transport=channel.transport,
                spec=spec,
                server=server.uri,
                clock=self._clock,
                publish=self._publisher(channel),
                backoff=_FILE_BACKOFF if isinstance(server, FileSource) else self._options.backoff,
                on_failure=self._failure_handler(channel),
                on_response=self._response_handler(channel),
                observers=self._observers,
                polling=isinstance(server, RestSource),
            )
            for rtype in types:
                channel.sessions[rtype.type_url] = session
                channel.drivers[rtype.type_url] = driver
            channel.tasks.start(driver.run(), name=f"xdsclient {spec} {server.uri}")
        return channel

    async def _stop(self, channel: _Channel) -> None:
        """End the channel's drivers, then its transport; then observers hear it is closed
        (after the drivers, so no event of theirs can say it is connected again)."""
        await channel.tasks.close()
        await channel.transport.close()
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

    def _publisher(self, channel: _Channel) -> Publish:
        """What ``channel``'s drivers publish, less the events of names whose authority it
        does not write: one it stands by for, one that left it, and one it never served (an
        ``xdstp://b/...`` resource that came through the wildcard of another authority)."""
        publish = self._publish
        if not isinstance(channel.server, ServerConfig):
            return publish  # a file or REST source serves its types for every authority
        sourced = self._sources  # types whose source serves them for every authority

        def publish_from(
            events: list[Event], after: asyncio.Future[None] | None = None
        ) -> asyncio.Future[None] | None:
            if events:
                writes = channel.users - channel.standby
                events = [
                    e for e in events if authority_of(e.name) in writes or e.type_url in sourced
                ]
            return publish(events, after)

        return publish_from

    def _failure_handler(self, channel: _Channel) -> Callable[[TransportError], None]:
        def on_failure(error: TransportError) -> None:
            channel.failing = True
            for name in list(channel.users - channel.standby):
                self._maybe_fall_back(self._authorities[name], channel)

        return on_failure

    def _response_handler(self, channel: _Channel) -> Callable[[], None]:
        def on_response() -> None:
            channel.failing = False
            if channel.standby:
                self._switch_back(channel)

        return on_response
