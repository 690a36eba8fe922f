"""Fallback between an authority's servers (gRFC A71) as a table: events in, actions out.

`Authorities` is pure, so each case is a list of steps (an event, and the actions it must
return, in order) over the same cases `tests/federation/test_fallback.py` runs end to end over
the fake transport. ``cache`` steps say which resources are cached (a value, or known not to
exist): the one fact fallback reads from outside.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz import examples
from xdsclient import ServerConfig
from xdsclient._names import OLD_AUTHORITY
from xdsclient._shell._authorities import (
    Action,
    Authorities,
    Close,
    HandOver,
    Reason,
    Subscribe,
    Unsubscribe,
)

P, S, T = (
    ServerConfig(uri="primary:1"),
    ServerConfig(uri="secondary:1"),
    ServerConfig(uri="third:1"),
)
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
OLD = OLD_AUTHORITY
B = "b.example"

FIRST, FALLBACK, RECOVERY = Reason.FIRST, Reason.FALLBACK, Reason.RECOVERY

#: The bootstrap of most cases: old-style names on primary then secondary.
TWO: Mapping[str, tuple[ServerConfig, ...]] = {OLD: (P, S)}


class _World:
    """An `Authorities` and the cached resources the steps declare."""

    def __init__(self, servers: Mapping[str, tuple[ServerConfig, ...]]) -> None:
        self.authorities = Authorities(servers.get)
        self.cached: set[tuple[str, str, str]] = set()

    def is_cached(self, authority: str, type_url: str, names: Collection[str]) -> bool:
        return all((authority, type_url, name) in self.cached for name in names)

    def step(self, event: tuple[Any, ...]) -> list[Action]:
        kind, *args = event
        a = self.authorities
        if kind == "subscribe":
            authority, type_url, names = args
            return a.subscribe(authority, type_url, names, self.is_cached)
        if kind == "unsubscribe":
            return a.unsubscribe(*args)
        if kind == "fail":
            return a.failed(args[0], self.is_cached)
        if kind == "answer":
            return a.answered(args[0])
        if kind == "cache":
            authority, type_url, name = args
            self.cached.add((authority, type_url, name))
            return []
        raise AssertionError(kind)


def _sub(authority: str, *names: str, type_url: str = EDS) -> tuple[Any, ...]:
    return ("subscribe", authority, type_url, names)


CASES: dict[str, tuple[Mapping[str, tuple[ServerConfig, ...]], list[tuple[Any, list[Action]]]]] = {
    "a primary down at start falls back, then goes back once it answers": (
        TWO,
        [
            (
                _sub(OLD, "a"),
                [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))],
            ),
            (
                ("fail", P),
                [Subscribe(S, EDS, ("a",)), HandOver(OLD, S, P, (EDS,), FALLBACK)],
            ),
            (("cache", OLD, EDS, "a"), []),
            (("fail", P), []),  # retrying: already standing by
            (("answer", S), []),
            (
                ("answer", P),
                [
                    HandOver(OLD, P, S, (EDS,), RECOVERY),
                    Unsubscribe(S, EDS, ("a",)),
                    Close(S),
                ],
            ),
        ],
    ),
    "a primary lost with everything cached does not fall back": (
        TWO,
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (("answer", P), []),
            (("cache", OLD, EDS, "a"), []),
            (("fail", P), []),
        ],
    ),
    "a does-not-exist answer counts as cached": (
        TWO,
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (("cache", OLD, EDS, "a"), []),  # the does-not-exist timer fired: known absent
            (("fail", P), []),
        ],
    ),
    "a new watch while the primary is down falls back with everything watched": (
        TWO,
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (("cache", OLD, EDS, "a"), []),
            (("fail", P), []),
            (
                _sub(OLD, "b"),
                [
                    Subscribe(P, EDS, ("b",)),  # the primary stays subscribed: it retries
                    Subscribe(S, EDS, ("a", "b")),
                    HandOver(OLD, S, P, (EDS,), FALLBACK),
                ],
            ),
        ],
    ),
    "the wildcard alone is never missing": (
        TWO,
        [
            (_sub(OLD, "*"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("*",))]),
            (("fail", P), []),
        ],
    ),
    "all servers down: the authority moves to the last, then back to the first that answers": (
        {OLD: (P, S, T)},
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (
                ("fail", P),
                [Subscribe(S, EDS, ("a",)), HandOver(OLD, S, P, (EDS,), FALLBACK)],
            ),
            (
                ("fail", S),
                [Subscribe(T, EDS, ("a",)), HandOver(OLD, T, S, (EDS,), FALLBACK)],
            ),
            (("fail", T), []),  # nothing left to try: watchers hear of it from the last
            (
                ("answer", S),
                [HandOver(OLD, S, T, (EDS,), RECOVERY), Unsubscribe(T, EDS, ("a",)), Close(T)],
            ),
            (
                ("answer", P),
                [HandOver(OLD, P, S, (EDS,), RECOVERY), Unsubscribe(S, EDS, ("a",)), Close(S)],
            ),
        ],
    ),
    "a failing fallback passes the authority straight on": (
        {OLD: (P, S, T), B: (S,)},
        [
            (_sub(B, "x"), [HandOver(B, S, None, (), FIRST), Subscribe(S, EDS, ("x",))]),
            (("fail", S), []),  # b.example has no other server
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (
                ("fail", P),
                [
                    Subscribe(S, EDS, ("a",)),
                    HandOver(OLD, S, P, (EDS,), FALLBACK),
                    Subscribe(T, EDS, ("a",)),
                    HandOver(OLD, T, S, (EDS,), FALLBACK),
                ],
            ),
        ],
    ),
    "a flapping primary moves the authority each time something is missing": (
        TWO,
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (("fail", P), [Subscribe(S, EDS, ("a",)), HandOver(OLD, S, P, (EDS,), FALLBACK)]),
            (("cache", OLD, EDS, "a"), []),
            (
                ("answer", P),
                [HandOver(OLD, P, S, (EDS,), RECOVERY), Unsubscribe(S, EDS, ("a",)), Close(S)],
            ),
            (("fail", P), []),  # everything cached
            (
                _sub(OLD, "b"),
                [
                    Subscribe(P, EDS, ("b",)),
                    Subscribe(S, EDS, ("a", "b")),
                    HandOver(OLD, S, P, (EDS,), FALLBACK),
                ],
            ),
        ],
    ),
    "a server shared by two authorities is one server; each falls back on its own terms": (
        {OLD: (P, S), B: (P, T)},
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (_sub(B, "y"), [HandOver(B, P, None, (), FIRST), Subscribe(P, EDS, ("y",))]),
            (("cache", B, EDS, "y"), []),
            (("fail", P), [Subscribe(S, EDS, ("a",)), HandOver(OLD, S, P, (EDS,), FALLBACK)]),
        ],
    ),
    "an authority on its own servers falls back alone": (
        {OLD: (P,), B: (S, T)},
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (_sub(B, "y"), [HandOver(B, S, None, (), FIRST), Subscribe(S, EDS, ("y",))]),
            (("fail", S), [Subscribe(T, EDS, ("y",)), HandOver(B, T, S, (EDS,), FALLBACK)]),
            (("fail", P), []),  # no server left for old-style names
        ],
    ),
    "a type first watched after a fallback goes to both servers down to the active one": (
        TWO,
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (("fail", P), [Subscribe(S, EDS, ("a",)), HandOver(OLD, S, P, (EDS,), FALLBACK)]),
            (("cache", OLD, EDS, "a"), []),
            (
                _sub(OLD, "c", type_url=CDS),
                [
                    Subscribe(P, CDS, ("c",)),
                    Subscribe(S, CDS, ("c",)),
                    # the primary is still failing and "c" is not cached: nothing left to try
                ],
            ),
            (
                ("answer", P),
                [
                    HandOver(OLD, P, S, (EDS, CDS), RECOVERY),
                    Unsubscribe(S, EDS, ("a",)),
                    Unsubscribe(S, CDS, ("c",)),
                    Close(S),
                ],
            ),
        ],
    ),
    "an unsubscription leaves every server down to the active one; the channel stays": (
        TWO,
        [
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (("fail", P), [Subscribe(S, EDS, ("a",)), HandOver(OLD, S, P, (EDS,), FALLBACK)]),
            (
                ("unsubscribe", OLD, EDS, "a"),
                [Unsubscribe(P, EDS, ("a",)), Unsubscribe(S, EDS, ("a",))],
            ),
            (("answer", P), [HandOver(OLD, P, S, (EDS,), RECOVERY), Close(S)]),
        ],
    ),
    "events of a server nobody uses (a closed one, a file source) change nothing": (
        TWO,
        [
            (("fail", S), []),
            (("answer", S), []),
            (_sub(OLD, "a"), [HandOver(OLD, P, None, (), FIRST), Subscribe(P, EDS, ("a",))]),
            (("answer", S), []),
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fallback_follows_the_table(case: str) -> None:
    """Each event of the case returns exactly the listed actions, in order."""
    servers, steps = CASES[case]
    world = _World(servers)
    for index, (event, expected) in enumerate(steps):
        actions = world.step(event)
        assert actions == expected, f"step {index}: {event}"


def test_only_the_active_server_writes_an_authority() -> None:
    """A server's events reach watchers only for the authorities it is active for: a fallback
    writes from its hand-over, and stops once the primary is back."""
    world = _World({OLD: (P, S), B: (S,)})
    world.step(_sub(OLD, "a"))
    world.step(_sub(B, "y"))
    writes = world.authorities.writes
    assert (writes(P), writes(S)) == ({OLD}, {B})
    world.step(("fail", P))
    assert (writes(P), writes(S)) == (set(), {OLD, B})
    assert world.authorities.active(OLD) == S
    world.step(("answer", P))
    assert (writes(P), writes(S)) == ({OLD}, {B})  # S stays open: b.example uses it
    assert world.authorities.active(OLD) == P


def test_an_authority_the_bootstrap_does_not_configure_is_refused() -> None:
    """Subscribing in an unknown authority raises, and nothing is to be done."""
    world = _World(TWO)
    with pytest.raises(ValueError, match="does not configure the authority 'nope'"):
        world.step(_sub("nope", "a"))
    assert world.authorities.active("nope") is None


_EVENTS = st.one_of(
    st.tuples(
        st.just("subscribe"),
        st.sampled_from([OLD, B]),
        st.sampled_from([EDS, CDS]),
        st.lists(st.sampled_from("abc*"), min_size=1, max_size=2),
    ),
    st.tuples(
        st.just("unsubscribe"),
        st.sampled_from([OLD, B]),
        st.sampled_from([EDS, CDS]),
        st.sampled_from("abc"),
    ),
    st.tuples(st.sampled_from(["fail", "answer"]), st.sampled_from([P, S, T])),
    st.tuples(
        st.just("cache"),
        st.sampled_from([OLD, B]),
        st.sampled_from([EDS, CDS]),
        st.sampled_from("abc"),
    ),
)


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_EVENTS, max_size=30))
def test_any_sequence_of_events_keeps_one_writer_and_closes_only_unused_servers(
    events: list[tuple[Any, ...]],
) -> None:
    """Whatever happens, each authority in use has exactly one writer (its active server),
    every action names a server the authority part has opened and not closed, and a closed
    server is used by nobody."""
    world = _World({OLD: (P, S, T), B: (S, P)})
    authorities = world.authorities
    opened: set[ServerConfig] = set()
    used: set[str] = set()
    for event in events:
        if event[0] == "unsubscribe" and event[1] not in used:
            continue  # the client unsubscribes only what it subscribed
        for action in world.step(event):
            if isinstance(action, Close):
                assert action.server in opened
                opened.discard(action.server)
                assert all(authorities.active(a) != action.server for a in used)
            elif isinstance(action, HandOver):
                opened.add(action.target)
                assert action.source is None or action.source in opened
            else:
                opened.add(action.server)
        if event[0] == "subscribe":
            used.add(event[1])
        for authority in used:
            writers = [s for s in (P, S, T) if authority in authorities.writes(s)]
            assert writers == [authorities.active(authority)]


def test_the_names_an_authority_watches_cost_a_dicts_keys_not_a_sets_table() -> None:
    """10,000 watched names of a type take at most 24 bytes each (a set's table took 52)."""
    authorities = Authorities(TWO.get)
    names = [f"cluster-{i}" for i in range(10_000)]
    authorities.subscribe(OLD, CDS, names, lambda *args: True)
    authorities.unsubscribe(OLD, CDS, names[0])
    watched = authorities._authorities[OLD].watched[CDS]
    assert sys.getsizeof(watched) / len(names) <= 24
    assert names[0] not in watched
    assert len(watched) == len(names) - 1
