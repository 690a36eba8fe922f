"""Which server serves each authority: gRFC A47 routing and A71 fallback, decided without I/O.

Why pure: fallback is a handful of rules over a little state (each authority's servers in
priority order, which one is active, what the authority watches; each server's users and
whether it is failing). Here they are decided as the protocol core decides requests: an event
in (a subscription, an unsubscription, a stream that failed before any response, a response),
the `Action` values to carry out returned, in order (the names it gathers itself come sorted,
so the same events always give the same actions). The pool (`_pool.py`) carries them out and
owns every channel, session and task; this module owns none. Whether a resource is cached is
the one fact read from outside, through the `Cached` query each event is given.

Rules (gRFC A71):
- ``active`` is the server whose session writes the authority's tables in the cache (its
  writer, `HandOver`). Every server above it stays subscribed (it keeps retrying).
- When the active server has a connectivity failure and a watched resource of the authority is
  not cached (no usable value, and not known not to exist), the next server becomes active: it
  is subscribed to everything the authority watches, then takes the authority over, starting
  from the cached entries. Subscriptions come before the hand-over: an entry nobody wants on
  the new server would not be taken.
- A response from a server above the active one makes it active again at once (the pool
  carries this out before the response is applied): it takes the authority over, and the
  servers below it drop the authority's names and are closed when nobody uses them.
- A subscription while the active server is failing re-checks the rule.
- A server's events reach watchers only for the authorities it writes (`writes`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from typing import Protocol, TypeAlias

import attrs

from .._names import WILDCARD
from .._settings._config import ServerConfig

__all__ = [
    "Action",
    "Authorities",
    "Cached",
    "Close",
    "HandOver",
    "Reason",
    "Subscribe",
    "Unsubscribe",
]


class Reason(enum.Enum):
    """Why a server takes an authority over."""

    FIRST = "first"  #: the authority is used for the first time: its first server
    FALLBACK = "fallback"  #: the active server is unreachable with resources missing
    RECOVERY = "recovery"  #: a server above the active one answered again


@attrs.frozen
class Subscribe:
    """Want ``names`` of ``type_url`` on ``server`` (opening its channel if need be)."""

    server: ServerConfig
    type_url: str
    names: tuple[str, ...]


@attrs.frozen
class Unsubscribe:
    """Stop wanting ``names`` of ``type_url`` on ``server``."""

    server: ServerConfig
    type_url: str
    names: tuple[str, ...]


@attrs.frozen
class HandOver:
    """``target`` becomes the writer of every table of ``authority``; of the ``types`` it
    watches, it first takes the entries ``source`` holds for the authority (None: nothing to
    take, the authority is new)."""

    authority: str
    target: ServerConfig
    source: ServerConfig | None
    types: tuple[str, ...]
    reason: Reason


@attrs.frozen
class Close:
    """No authority uses ``server`` any more: close its channel."""

    server: ServerConfig


Action: TypeAlias = Subscribe | Unsubscribe | HandOver | Close


class Cached(Protocol):
    """Whether every one of ``names`` of ``type_url`` in ``authority``'s tables is cached: a
    usable value, or known not to exist (gRFC A71's test before falling back)."""

    def __call__(self, authority: str, type_url: str, names: Collection[str]) -> bool: ...


class _Authority:
    """One authority: its servers in priority order, which is active, what it watches."""

    __slots__ = ("active", "name", "servers", "watched")

    def __init__(self, name: str, servers: tuple[ServerConfig, ...]) -> None:
        self.name = name
        self.servers = servers
        self.active = 0
        #: type URL -> names (the wildcard included), as a dict's keys: 21 bytes a name
        #: instead of a set's 52 (a set's table is kept sparser), 0.3 MiB per 10,000 names
        self.watched: dict[str, dict[str, None]] = {}


class _Server:
    """One server in use: who uses it, for whom it only stands by, whether it is failing."""

    __slots__ = ("failing", "standby", "users")

    def __init__(self) -> None:
        self.users: set[str] = set()  # authorities subscribed here (active or standby)
        self.standby: set[str] = set()  # authorities subscribed here that another server writes
        self.failing = False  # its last stream failed before any response


class Authorities:
    """The authorities in use and their servers: events in, actions out."""

    def __init__(self, servers_of: Callable[[str], tuple[ServerConfig, ...] | None]) -> None:
        """``servers_of``: an authority's servers in priority order (None: not configured)."""
        self._servers_of = servers_of
        self._authorities: dict[str, _Authority] = {}
        self._servers: dict[ServerConfig, _Server] = {}

    # ------------------------------------------------------------------ queries

    def writes(self, server: ServerConfig) -> set[str]:
        """The authorities whose events ``server`` may deliver: those it serves and writes."""
        state = self._servers.get(server)
        return set() if state is None else state.users - state.standby

    def active(self, authority: str) -> ServerConfig | None:
        """The server writing ``authority`` (None: not in use)."""
        state = self._authorities.get(authority)
        return None if state is None else state.servers[state.active]

    # ------------------------------------------------------------------ events

    def subscribe(
        self, authority: str, type_url: str, names: Collection[str], cached: Cached
    ) -> list[Action]:
        """``names`` of ``type_url`` in ``authority`` are wanted: on every server of the
        authority down to the active one (raises `ValueError` for an authority the bootstrap
        does not configure)."""
        actions: list[Action] = []
        state = self._authorities.get(authority)
        if state is None:
            servers = self._servers_of(authority)
            if not servers:
                raise ValueError(f"the bootstrap does not configure the authority {authority!r}")
            state = self._authorities[authority] = _Authority(authority, servers)
            self._use(servers[0], authority)
            actions.append(HandOver(authority, servers[0], None, (), Reason.FIRST))
        watched = state.watched.get(type_url)
        if watched is None:
            watched = state.watched[type_url] = {}
        for name in names:
            watched[name] = None
        wanted = tuple(names)
        for server in state.servers[: state.active + 1]:
            self._use(server, authority)
            actions.append(Subscribe(server, type_url, wanted))
        active = state.servers[state.active]
        if self._servers[active].failing:
            actions.extend(self._fall_back(state, active, cached))
        return actions

    def unsubscribe(self, authority: str, type_url: str, name: str) -> list[Action]:
        """``name`` is no longer wanted: it leaves every server subscribed to it."""
        state = self._authorities[authority]
        state.watched.get(type_url, {}).pop(name, None)
        return [
            Unsubscribe(server, type_url, (name,)) for server in state.servers[: state.active + 1]
        ]

    def failed(self, server: ServerConfig, cached: Cached) -> list[Action]:
        """A stream of ``server`` failed before any response (gRFC A57's connectivity failure):
        each authority it writes falls back when something it watches is not cached."""
        state = self._servers.get(server)
        if state is None:
            return []
        state.failing = True
        actions: list[Action] = []
        for name in list(state.users - state.standby):
            actions.extend(self._fall_back(self._authorities[name], server, cached))
        return actions

    def answered(self, server: ServerConfig) -> list[Action]:
        """A response from ``server``: it takes back every authority it stands by for."""
        state = self._servers.get(server)
        if state is None:
            return []
        state.failing = False
        actions: list[Action] = []
        for name in list(state.standby):
            authority = self._authorities[name]
            index = authority.servers.index(server)
            current = authority.servers[authority.active]
            types = tuple(authority.watched)
            actions.append(HandOver(name, server, current, types, Reason.RECOVERY))
            for lower in authority.servers[index + 1 : authority.active + 1]:
                actions.extend(self._leave(authority, lower))
            authority.active = index
            state.standby.discard(name)
        return actions

    # ------------------------------------------------------------------ transitions

    def _use(self, server: ServerConfig, authority: str) -> _Server:
        state = self._servers.get(server)
        if state is None:
            state = self._servers[server] = _Server()
        state.users.add(authority)
        return state

    def _fall_back(
        self, authority: _Authority, server: ServerConfig, cached: Cached
    ) -> list[Action]:
        """gRFC A71: ``server`` failed; if it is the active one, the next server takes over when
        something watched is not cached (and the one after it, if that one is failing too)."""
        if authority.servers[authority.active] != server:
            return []
        if authority.active + 1 >= len(authority.servers) or self._complete(authority, cached):
            return []
        authority.active += 1
        target = authority.servers[authority.active]
        target_state = self._use(target, authority.name)
        self._servers[server].standby.add(authority.name)
        target_state.standby.discard(authority.name)
        actions: list[Action] = [
            Subscribe(target, type_url, tuple(sorted(names)))
            for type_url, names in authority.watched.items()
        ]
        types = tuple(authority.watched)
        actions.append(HandOver(authority.name, target, server, types, Reason.FALLBACK))
        if target_state.failing:
            actions.extend(self._fall_back(authority, target, cached))
        return actions

    def _complete(self, authority: _Authority, cached: Cached) -> bool:
        for type_url, names in authority.watched.items():
            wanted = names.keys() - {WILDCARD} if WILDCARD in names else names.keys()
            if wanted and not cached(authority.name, type_url, wanted):
                return False
        return True

    def _leave(self, authority: _Authority, server: ServerConfig) -> list[Action]:
        """``authority`` stops using ``server``; the server closes when nobody uses it."""
        actions: list[Action] = [
            Unsubscribe(server, type_url, tuple(sorted(names)))
            for type_url, names in authority.watched.items()
            if names
        ]
        state = self._servers[server]
        state.users.discard(authority.name)
        state.standby.discard(authority.name)
        if not state.users:
            del self._servers[server]
            actions.append(Close(server))
        return actions
