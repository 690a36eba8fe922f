"""The sans-I/O protocol core: every resource type multiplexed on one xDS stream.

Why: all of the xDS transport protocol (what to request, how to answer each response, when a
resource is declared missing or expired) is decided here, synchronously and deterministically,
so it can be tested exhaustively with a fake clock. The shell around it only moves messages:

    session.connect(now)                      # a stream was opened
    for request in session.requests_to_send(now): write(request)
    events = session.receive(response, now)   # then write requests_to_send(now) again
    events = session.expire(now)              # when now >= session.next_deadline()
    events = session.disconnect(now, error)   # the stream ended

ADS is one session holding every type; a non-aggregated (per-type) stream is a session holding
one type. SotW or Delta is chosen per session. These calls are the `StreamProtocol` the shell's
driver runs (`xdsclient._shell._driver`): any other stream protocol (load reporting) is driven
the same way.

Rules:
- The node goes in the first request of each stream only.
- Interest changes made before the next `requests_to_send` are coalesced into one request per
  type; an ACK owed for a type rides in that same request, so it is never delayed behind them.
  Every response of a known type is answered exactly once, in order, with its own nonce.
- Responses for a type this stream never requested are ignored (not answered).
- The core never reads a clock, sleeps, or calls user code: time comes in as ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from .._errors import ProtocolError, XdsError
from .._names import OLD_AUTHORITY
from ..resources._type import ResourceType
from ._cache import CacheEntry, ResourceCache, Table
from ._classify import key_of
from ._deadlines import Deadlines
from ._delta import DeltaTypeState
from ._events import Event
from ._messages import DeltaDiscoveryResponse, DiscoveryResponse, Request, Response
from ._options import ProtocolOptions
from ._sotw import SotwTypeState
from ._status import ResourceState
from ._typestate import DeadlineKey

__all__ = ["Session", "SessionWriter"]


class SessionWriter(Protocol):
    """Everything the shell may call to change a session, besides the `StreamProtocol` steps
    its driver takes (`connect`, `receive`, `expire`, `disconnect`, ...): the names it wants,
    and a change of server's hand-over (gRFC A71). The shell makes these calls through the
    driver's `command`, between two steps; nothing outside the protocol core touches a
    session's private state (``tests/test_imports.py`` holds every module to that)."""

    def subscribe(self, type_url: str, name: str) -> None:
        """Want ``name`` (``"*"``: the wildcard) of ``type_url``."""

    def subscribe_all(self, type_url: str, names: Iterable[str]) -> None:
        """Want each of ``names`` of ``type_url``."""

    def unsubscribe(self, type_url: str, name: str) -> None:
        """Stop wanting ``name`` of ``type_url``."""

    def adopt(self, type_url: str, name: str, source: CacheEntry) -> None:
        """Take another session's entry for a wanted ``name`` (the hand-over's new writer)."""

    def table(self, type_url: str) -> Table:
        """This session's table of ``type_url``, which the cache reads while it writes."""


class Session(SessionWriter):
    """Protocol state for one xDS stream (ADS or per-type, SotW or Delta).

    The cache and the subscriptions outlive any one stream: `connect` / `disconnect` bracket
    each stream, and versions, cached resources and TTLs carry over to the next one.
    """

    def __init__(
        self,
        *,
        node: Any,
        resource_types: Iterable[ResourceType[Any]],
        delta: bool = False,
        options: ProtocolOptions | None = None,
        cache: ResourceCache | None = None,
        authority: str = OLD_AUTHORITY,
    ) -> None:
        """``cache`` and ``authority``: assign this session's tables there (the client assigns
        them itself, per authority, when one session serves several)."""
        self._node = node
        self._cache = cache if cache is not None else ResourceCache()
        self._delta = delta
        self._options = options if options is not None else ProtocolOptions()
        self._deadlines: Deadlines[DeadlineKey] = Deadlines()
        state_class = DeltaTypeState if delta else SotwTypeState
        self._types: dict[str, SotwTypeState | DeltaTypeState] = {}
        for rtype in resource_types:
            if rtype.type_url in self._types:
                raise ValueError(f"resource type {rtype.type_url} given twice")
            entries: Table = {}
            self._cache.assign(authority, rtype.type_url, entries)
            self._types[rtype.type_url] = state_class(
                rtype, self._options, self._deadlines, entries
            )
        self._response_class = DeltaDiscoveryResponse if delta else DiscoveryResponse
        self._connected = False
        self._node_sent = False
        self._response_received = False
        #: the type state the last response was applied to (for `verdicts`)
        self._last_applied: SotwTypeState | DeltaTypeState | None = None

    # ----------------------------------------------------------------- properties

    @property
    def delta(self) -> bool:
        """Whether this session speaks the incremental (Delta) variant."""
        return self._delta

    @property
    def cache(self) -> ResourceCache:
        """Where this session keeps its resources (shared with other sessions of a client)."""
        return self._cache

    # The pool's hand-over between servers (gRFC A71), carried out through the session's driver
    # (`xdsclient._shell._channel.Channel`): part of the `SessionWriter`, not of the protocol.

    def table(self, type_url: str) -> Table:
        """This session's table of one type (every authority it serves): what the pool assigns
        in the client's `ResourceCache` while this session writes an authority."""
        return self._state(type_url).entries

    def adopt(self, type_url: str, name: str, source: CacheEntry) -> None:
        """Take another session's entry for a wanted ``name`` (a change of server, gRFC A71):
        its status, value and errors, with its TTL re-armed and no does-not-exist timer when it
        is already known. Its version is not claimed to this server (Delta)."""
        self._state(type_url).adopt(name, source)

    @property
    def connected(self) -> bool:
        """Between `connect` and `disconnect`."""
        return self._connected

    @property
    def response_received(self) -> bool:
        """Whether the current (or last) stream received at least one response (gRFC A57)."""
        return self._response_received

    @property
    def type_urls(self) -> tuple[str, ...]:
        """The type URLs this session serves, in the order its resource types were given."""
        return tuple(self._types)

    def type_state(self, type_url: str) -> SotwTypeState | DeltaTypeState:
        """The state of one type, to inspect (tests, the load tester's reports); it changes only
        through this session."""
        return self._state(type_url)

    @property
    def deadlines(self) -> Deadlines[DeadlineKey]:
        """The armed does-not-exist and TTL deadlines, to inspect."""
        return self._deadlines

    def _state(self, type_url: str) -> SotwTypeState | DeltaTypeState:
        try:
            return self._types[type_url]
        except KeyError:
            raise ProtocolError(f"resource type {type_url} is not part of this session") from None

    # ----------------------------------------------------------------- interest

    def subscribe(self, type_url: str, name: str) -> None:
        """Want resource ``name`` (``"*"`` for the wildcard) of a type; idempotent. An xdstp
        name is taken in canonical form (`key_of`), as every name a response gives is."""
        self._state(type_url).subscribe(key_of(name, type_url))

    def subscribe_all(self, type_url: str, names: Iterable[str]) -> None:
        """`subscribe` to each of ``names`` (a walk's thousands: one type lookup)."""
        subscribe = self._state(type_url).subscribe
        for name in names:
            subscribe(key_of(name, type_url))

    def unsubscribe(self, type_url: str, name: str) -> None:
        """Stop wanting ``name``: it leaves the cache at the next `requests_to_send`, unless the
        wildcard still covers it or it was subscribed again by then."""
        self._state(type_url).unsubscribe(key_of(name, type_url))

    @property
    def has_interest(self) -> bool:
        """Whether any type has a subscription (a name or the wildcard)."""
        return any(state.has_interest for state in self._types.values())

    def subscribed(self, type_url: str) -> tuple[str, ...]:
        """The explicitly subscribed names of a type, with ``"*"`` first when wildcard is on."""
        state = self._state(type_url)
        return (("*",) if state.wildcard else ()) + tuple(state.names)

    # ----------------------------------------------------------------- stream

    def connect(self, now: float) -> None:
        """A new stream is open: the next requests restate all interest, node first."""
        if self._connected:
            raise ProtocolError("connect() on a session that is already connected")
        self._connected = True
        self._node_sent = False
        self._response_received = False
        for state in self._types.values():
            state.reset_stream()

    def disconnect(
        self, now: float, error: XdsError | None = None, *, report: bool | None = None
    ) -> list[Event]:
        """The stream ended. With ``error`` and no response received on it, watchers hear of it
        (``report``: whether they do, when the caller knows better: a failed poll always is).

        Does-not-exist timers stop (they restart for still-missing resources on the next
        stream); cached resources, versions and TTL timers stay.
        """
        if not self._connected:
            raise ProtocolError("disconnect() on a session that is not connected")
        self._connected = False
        events: list[Event] = []
        if report is None:
            report = not self._response_received
        for state in self._types.values():
            state.stream_lost()
            if error is not None and report:
                state.connectivity_error(error, now, events)
        return events

    def requests_to_send(self, now: float) -> list[Request]:
        """The requests to write now, in order; hand each one to the stream.

        Calling this is what counts as sending (call it only once the stream is established):
        does-not-exist timers for the names these requests newly carry start at ``now``. It
        first settles interest changes: a resource dropped and re-added since the last call
        stays as it was, one dropped for good is forgotten. While disconnected it only settles.
        """
        for state in self._types.values():
            state.settle_interest()
        if not self._connected:
            return []
        requests: list[Request] = []
        for state in self._types.values():
            if state.dirty or state.pending_acks:
                requests.extend(state.take_requests())
                state.arm_sent(now)
        if requests and not self._node_sent:
            requests[0].node.CopyFrom(self._node)
            self._node_sent = True
        return requests

    def receive(self, response: Response, now: float, raw: bytes | None = None) -> list[Event]:
        """Apply one response; its ACK or NACK is in the next `requests_to_send`. ``raw``: the
        bytes ``response`` was decoded from, where the transport has them (SotW then reads the
        resources from them; without, it serializes the message again where it reads bytes).
        Given or not, the verdicts, events and requests are the same."""
        if not self._connected:
            raise ProtocolError("receive() on a session that is not connected")
        if not isinstance(response, self._response_class):
            raise ProtocolError(
                f"this {'Delta' if self._delta else 'SotW'} session cannot take a "
                f"{type(response).__name__}"
            )
        self._response_received = True
        state = self._types.get(response.type_url)
        events: list[Event] = []
        previous, self._last_applied = self._last_applied, None
        if previous is not None:  # only the last response has verdicts: free its classify step
            previous.last_classified = None
        if state is None or not state.sent_on_stream:
            return events
        state.last_classified = None
        self._last_applied = state
        count = len(response.resources)
        limit = self._options.max_resources_per_response
        if count > limit:
            state.reject(
                response.nonce, f"{count} resources exceed max_resources_per_response ({limit})"
            )
        else:
            state.receive(response, now, events, raw)
        return events

    def verdicts(self) -> list[tuple[str, str | None]]:
        """The verdict on each resource of the last response received: ``(name, None)`` when
        valid (changed or not), ``(name, reason)`` when rejected; ``("", reason)`` for one that
        could not be named. Empty when the response was ignored or rejected whole. Only
        resources that were asked for (or came through the wildcard) are listed."""
        state = self._last_applied
        classified = state.last_classified if state is not None else None
        if state is None or classified is None:
            return []
        result: list[tuple[str, str | None]] = [(name, None) for name in classified.valid_names]
        result.extend(("", reason) for reason in classified.errors[: state.last_unnamed])
        result.extend(classified.invalid.items())
        return result

    # ----------------------------------------------------------------- time

    def next_deadline(self) -> float | None:
        """When `expire` has work to do next, or None."""
        return self._deadlines.next_deadline()

    def expire(self, now: float) -> list[Event]:
        """Fire every does-not-exist and TTL deadline at or before ``now``."""
        events: list[Event] = []
        for kind, type_url, name in self._deadlines.expire(now):
            self._types[type_url].expire(kind, name, now, events)
        return events

    # ----------------------------------------------------------------- introspection

    def resource_state(self, type_url: str, name: str) -> ResourceState | None:
        """A snapshot of one cached resource, or None when it is neither wanted nor held."""
        return self._state(type_url).state(key_of(name, type_url))

    def resource_states(self, type_url: str | None = None) -> list[ResourceState]:
        """Snapshots of every cached resource (of one type, or of all)."""
        states = [self._state(type_url)] if type_url is not None else list(self._types.values())
        result = []
        for state in states:
            for name in state.entries:
                snapshot = state.state(name)
                if snapshot is not None:
                    result.append(snapshot)
        return result

    def version_info(self, type_url: str) -> str:
        """SotW: the last accepted version of the type. Delta: the last system_version_info."""
        state = self._state(type_url)
        if isinstance(state, SotwTypeState):
            return state.version_info
        return state.system_version_info
