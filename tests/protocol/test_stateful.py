"""Hypothesis drives a session through random interleavings and checks the protocol invariants.

Steps: subscribe, unsubscribe, connect, disconnect (with or without error), send, responses
(valid, invalid, duplicate, wrong type, unknown type, heartbeats, TTLs, removals, server errors)
and clock advances, for SotW and Delta. After every step:
- every response of a type requested on the stream is answered exactly once, in order, with its
  own nonce, and nothing else reuses an unanswered nonce;
- a NACK carries the previous accepted version (SotW), an ACK the response's;
- a response is NACKed exactly when it held something invalid;
- no request carries a nonce from an earlier stream;
- no does-not-exist deadline exists for a name not sent on the current stream;
- without the wildcard, the cache holds only subscribed names;
- events are only about wanted resources;
- no exception escapes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.builders import (
    EDS,
    LDS,
    delta_resource,
    delta_response,
    endpoints,
    listener,
    raw_any,
    session,
    sotw_response,
    wrapped,
)
from tests.fuzz import examples
from xdsclient import Event, TransportError
from xdsclient._protocol._typestate import DNE

NAMES = ["a", "b", "c"]
TYPES = [LDS, EDS]
UNKNOWN = "type.googleapis.com/unknown.Type"


def _message(type_url: str, name: str, variant: int) -> Any:
    return listener(name) if type_url == LDS else endpoints(name, port=1000 + variant)


class _Protocol(RuleBasedStateMachine):
    delta = False

    def __init__(self) -> None:
        super().__init__()
        self.s = session(delta=self.delta, does_not_exist_timeout=5.0)
        self.now = 0.0
        self.connected = False
        self.nonce_counter = 0
        self.subs: dict[str, set[str]] = {t: set() for t in TYPES}
        # unsubscribed since interest was last settled (by requests_to_send): may linger
        self.dropped: dict[str, set[str]] = {t: set() for t in TYPES}
        # stream-scoped model
        self.stream_nonces: set[str] = set()
        self.requested_on_stream: set[str] = set()
        self.sent_names: dict[str, set[str]] = {t: set() for t in TYPES}
        self.owed: dict[str, list[tuple[str, str, bool]]] = {t: [] for t in TYPES}
        self.last_nonce: dict[str, str] = dict.fromkeys(TYPES, "")
        # survives streams
        self.accepted: dict[str, str] = dict.fromkeys(TYPES, "")
        self.events: list[Event] = []

    # ------------------------------------------------------------- interest

    @rule(type_url=st.sampled_from(TYPES), name=st.sampled_from([*NAMES, "*"]))
    def subscribe(self, type_url: str, name: str) -> None:
        self.s.subscribe(type_url, name)
        self.subs[type_url].add(name)

    @rule(type_url=st.sampled_from(TYPES), name=st.sampled_from([*NAMES, "*"]))
    def unsubscribe(self, type_url: str, name: str) -> None:
        self.s.unsubscribe(type_url, name)
        if name in self.subs[type_url]:
            self.dropped[type_url].add(name)
        self.subs[type_url].discard(name)

    # ------------------------------------------------------------- stream

    @precondition(lambda self: not self.connected)
    @rule()
    def connect(self) -> None:
        self.s.connect(self.now)
        self.connected = True
        self.stream_nonces = set()
        self.requested_on_stream = set()
        self.sent_names = {t: set() for t in TYPES}
        self.owed = {t: [] for t in TYPES}
        self.last_nonce = dict.fromkeys(TYPES, "")

    @precondition(lambda self: self.connected)
    @rule(with_error=st.booleans())
    def disconnect(self, with_error: bool) -> None:
        self.events += self.s.disconnect(self.now, TransportError("cut") if with_error else None)
        self.connected = False

    @rule()
    def send(self) -> None:
        requests = self.s.requests_to_send(self.now)
        self.dropped = {t: set() for t in TYPES}
        if not self.connected:
            assert requests == []
            return
        by_type: dict[str, list[Any]] = {}
        for request in requests:
            assert request.type_url in TYPES
            by_type.setdefault(request.type_url, []).append(request)
        for type_url in TYPES:
            sent = by_type.get(type_url, [])
            owed = self.owed[type_url]
            if owed:
                assert [r.response_nonce for r in sent] == [nonce for nonce, _, _ in owed]
                for request, (_, version, bad) in zip(sent, owed, strict=True):
                    assert request.HasField("error_detail") == bad
                    if bad:
                        assert request.error_detail.code == 3
                        assert request.error_detail.message
                    if not self.delta:
                        assert request.version_info == version
                self.owed[type_url] = []
            else:
                assert len(sent) <= 1
                for request in sent:
                    assert not request.HasField("error_detail")
                    expected = "" if self.delta else self.last_nonce[type_url]
                    assert request.response_nonce == expected
            for request in sent:
                assert request.response_nonce == "" or request.response_nonce in self.stream_nonces
                self.requested_on_stream.add(type_url)
                names = request.resource_names_subscribe if self.delta else request.resource_names
                self.sent_names[type_url].update(names)
                if self.delta:
                    self.sent_names[type_url].update(request.initial_resource_versions)

    # ------------------------------------------------------------- time

    @rule(dt=st.sampled_from([0.5, 2.0, 5.0, 30.0]))
    def advance(self, dt: float) -> None:
        self.now += dt
        self.events += self.s.expire(self.now)

    # ------------------------------------------------------------- responses

    def _nonce(self) -> str:
        self.nonce_counter += 1
        return f"nonce-{self.nonce_counter}"

    def _wanted(self, type_url: str, name: str) -> bool:
        return name in self.subs[type_url] or "*" in self.subs[type_url]

    def _lingering(self, type_url: str, name: str) -> bool:
        """Dropped, but the drop is not settled yet: it may still be held and hear events."""
        return name in self.dropped[type_url] or "*" in self.dropped[type_url]

    @precondition(lambda self: self.connected)
    @rule(data=st.data())
    def receive(self, data: st.DataObject) -> None:
        type_url = data.draw(st.sampled_from([*TYPES, UNKNOWN]))
        nonce = self._nonce()
        if type_url == UNKNOWN:
            response: Any
            if self.delta:
                response = delta_response(UNKNOWN, nonce=nonce)
            else:
                response = sotw_response(UNKNOWN, [], version="x", nonce=nonce)
            assert self.s.receive(response, self.now) == []
            return
        items = data.draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["res", "res", "res", "beat", "garbage", "wrong"]),
                    st.sampled_from([*NAMES, "zz"]),
                    st.integers(0, 2),
                    st.sampled_from([None, None, 3.0, 20.0]),
                ),
                max_size=5,
            )
        )
        errors = data.draw(
            st.lists(
                st.tuples(st.sampled_from(NAMES), st.sampled_from([5, 7, 14]), st.just("e")),
                max_size=2,
            )
        )
        version = f"v{data.draw(st.integers(0, 3))}"
        names = [
            name
            for kind, name, _, _ in items
            if not (kind in ("garbage", "wrong") and not self.delta)
        ]
        bad = len(names) != len(set(names))
        if self.delta:
            resources = []
            for kind, name, variant, ttl in items:
                if kind == "res":
                    resources.append(
                        delta_resource(
                            name, _message(type_url, name, variant), version=f"r{variant}", ttl=ttl
                        )
                    )
                elif kind == "beat":
                    resources.append(delta_resource(name, None, version=f"r{variant}", ttl=ttl))
                elif kind == "garbage":
                    resources.append(delta_resource(name, raw_any(type_url, b"\xff"), version="g"))
                    bad = bad or self._wanted(type_url, name)
                else:
                    resources.append(delta_resource(name, raw_any(UNKNOWN, b""), version="w"))
                    bad = bad or self._wanted(type_url, name)
            removed = tuple(data.draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True)))
            response = delta_response(
                type_url, resources, nonce=nonce, removed=removed, errors=errors
            )
        else:
            packed = []
            for kind, name, variant, ttl in items:
                if kind == "res":
                    message = _message(type_url, name, variant)
                    packed.append(
                        wrapped(message, name=name, version=version, ttl=ttl) if ttl else message
                    )
                elif kind == "beat":
                    packed.append(wrapped(None, name=name, version=f"v{variant}", ttl=ttl))
                elif kind == "garbage":
                    packed.append(raw_any(type_url, b"\xff"))
                    bad = True
                else:
                    packed.append(raw_any(UNKNOWN, b""))
                    bad = True
            response = sotw_response(type_url, packed, version=version, nonce=nonce, errors=errors)
        self.events += self.s.receive(response, self.now)
        self.stream_nonces.add(nonce)
        if type_url in self.requested_on_stream:
            # A response is accepted when applied; its ACK carries its version, a NACK the
            # version accepted before it. Both survive the stream.
            if not bad:
                self.accepted[type_url] = version
            self.owed[type_url].append((nonce, self.accepted[type_url], bad))
            self.last_nonce[type_url] = nonce
            if not self.delta:
                assert self.s.version_info(type_url) == self.accepted[type_url]

    # ------------------------------------------------------------- invariants

    @invariant()
    def dne_deadlines_only_for_names_sent_on_this_stream(self) -> None:
        for kind, type_url, name in self.s.deadlines:
            if kind == DNE:
                assert self.connected
                assert name in self.sent_names[type_url], (type_url, name)

    @invariant()
    def cache_holds_nothing_unrequested_without_wildcard(self) -> None:
        for type_url in TYPES:
            held = {state.name for state in self.s.resource_states(type_url)}
            if "*" not in self.subs[type_url] | self.dropped[type_url]:
                assert held <= self.subs[type_url] | self.dropped[type_url]
            else:
                assert held >= self.subs[type_url] - {"*"}

    @invariant()
    def events_are_only_about_wanted_resources(self) -> None:
        for event in self.events:
            name = event.name
            assert (
                name == "*"
                or self._wanted(event.type_url, name)
                or self._lingering(event.type_url, name)
            ), event
        self.events = []


class SotwProtocol(_Protocol):
    delta = False


class DeltaProtocol(_Protocol):
    delta = True


_settings = settings(
    max_examples=examples(150),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSotwProtocol = SotwProtocol.TestCase
TestSotwProtocol.settings = _settings
TestDeltaProtocol = DeltaProtocol.TestCase
TestDeltaProtocol.settings = _settings
