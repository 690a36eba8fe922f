"""The SotW server stream's rules, sans-I/O: requests and the store in, responses out."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xdsclient.testing._server_sotw import TRANSITIONS, Asked, asked
from xdsclient.testing._server_stream import Mode
from xdsclient.testing._store import ResourceStore

from .helpers import CDS, EDS, LDS, names_of, set_, sotw_request, sotw_responses, stream


def test_an_empty_first_request_is_a_wildcard_for_any_type() -> None:
    """The legacy wildcard: an empty first request gets every resource of its type."""
    store = ResourceStore()
    set_(store, EDS, "a")
    set_(store, EDS, "b")
    s = stream(store)
    s.receive(sotw_request(EDS), now=1.0)
    [response] = sotw_responses(s)
    assert names_of(response) == ["a", "b"]
    assert response.nonce == "1-1"
    assert response.version_info == store.type_version(EDS)


def test_named_requests_get_only_their_names_in_the_store_order() -> None:
    """A request naming resources gets those that exist, in the order they were first set."""
    store = ResourceStore()
    for name in "abcdefghijklmnopqrstuvwxyz":
        set_(store, EDS, name)
    s = stream(store)
    s.receive(sotw_request(EDS, "q", "c", "missing"), now=0.0)
    assert [names_of(r) for r in sotw_responses(s)] == [["c", "q"]]


def test_a_request_with_another_nonce_is_stale_and_ignored() -> None:
    """Once a response went out, a request not carrying its nonce changes nothing."""
    store = ResourceStore()
    set_(store, EDS, "a")
    set_(store, EDS, "b")
    s = stream(store)
    s.receive(sotw_request(EDS, "a"), now=0.0)
    [first] = sotw_responses(s)
    s.receive(sotw_request(EDS, "a", "b", nonce="stale"), now=0.0)
    assert sotw_responses(s) == []
    s.receive(sotw_request(EDS, "a", "b", nonce=first.nonce), now=0.0)
    assert [names_of(r) for r in sotw_responses(s)] == [["b"]]


def test_lds_and_cds_carry_the_full_state_and_other_types_only_changes() -> None:
    """A change resends every wanted LDS/CDS resource (a deletion too), only the changed EDS."""
    store = ResourceStore()
    for type_url in (CDS, EDS):
        set_(store, type_url, "a")
        set_(store, type_url, "b")
    s = stream(store)
    s.receive(sotw_request(CDS), now=0.0)
    s.receive(sotw_request(EDS, "a", "b"), now=0.0)
    sotw_responses(s)
    set_(store, CDS, "a", generation=1)
    set_(store, EDS, "a", generation=1)
    for type_url in (CDS, EDS):
        s.changed(type_url)
    assert [names_of(r) for r in sotw_responses(s)] == [["a", "b"], ["a"]]
    store.remove(CDS, "b")
    store.remove(EDS, "b")
    s.changed(CDS)
    s.changed(EDS)
    assert [names_of(r) for r in sotw_responses(s)] == [["a"]]


def test_a_changed_lds_request_is_answered_even_when_nothing_changed() -> None:
    """Naming one more missing listener gets the same state again, with a new nonce."""
    store = ResourceStore()
    set_(store, LDS, "l")
    s = stream(store)
    s.receive(sotw_request(LDS, "l"), now=0.0)
    [first] = sotw_responses(s)
    s.receive(sotw_request(LDS, "l", "missing", nonce=first.nonce), now=0.0)
    [again] = sotw_responses(s)
    assert names_of(again) == ["l"]
    assert again.nonce != first.nonce


def test_a_newly_requested_name_is_sent_again() -> None:
    """Dropping a name and asking for it again resends it (the client may have dropped it)."""
    store = ResourceStore()
    set_(store, EDS, "a")
    set_(store, EDS, "b")
    s = stream(store)
    s.receive(sotw_request(EDS, "a", "b"), now=0.0)
    [first] = sotw_responses(s)
    s.receive(sotw_request(EDS, "a", nonce=first.nonce), now=0.0)
    assert sotw_responses(s) == []
    s.receive(sotw_request(EDS, "a", "b", nonce=first.nonce), now=0.0)
    assert [names_of(r) for r in sotw_responses(s)] == [["b"]]


def test_a_change_of_a_type_never_asked_for_owes_nothing() -> None:
    """The store's change of a type the stream did not ask for does not wake it."""
    store = ResourceStore()
    s = stream(store)
    s.receive(sotw_request(EDS, "a"), now=0.0)
    assert s.changed(EDS)
    assert not s.changed(CDS)


def test_records_carry_the_time_passed_in() -> None:
    """Requests and responses are stamped with the ``now`` given, never a clock."""
    store = ResourceStore()
    set_(store, EDS, "a")
    s = stream(store, stream_id=7)
    record = s.receive(sotw_request(EDS, "a"), now=12.5)
    assert (record.time, record.stream, record.method) == (12.5, 7, "/ads")
    [out] = s.respond(now=13.0)
    assert (out.record.time, out.record.names, out.record.nonce) == (13.0, ("a",), "7-1")


def _reference(first: bool, legacy: bool, names: set[str]) -> tuple[bool, bool]:
    """The spec's wildcard as the old ControlPlane computed it: (legacy, wildcard) after."""
    if first:
        legacy = not names
    elif names:
        legacy = False
    return legacy, legacy or "*" in names


_BEFORE = {
    Mode.UNREQUESTED: (True, False),
    Mode.LEGACY_WILDCARD: (False, True),
    Mode.WILDCARD: (False, False),
    Mode.NAMED: (False, False),
}


@pytest.mark.parametrize(
    ("mode", "names"),
    list(itertools.product(Mode, [set(), {"a"}, {"*"}, {"*", "a"}])),
)
def test_the_wildcard_table_agrees_with_the_spec_rule(mode: Mode, names: set[str]) -> None:
    """Every (mode, request) gives the mode the legacy/explicit wildcard rule gives."""
    first, legacy = _BEFORE[mode]
    legacy_after, wildcard_after = _reference(first, legacy, names)
    after = TRANSITIONS[mode, asked(names)]
    assert after.wildcard == wildcard_after
    assert (after is Mode.LEGACY_WILDCARD) == legacy_after


def test_the_table_covers_every_mode_and_request() -> None:
    """No (mode, request) is missing from the table."""
    assert set(TRANSITIONS) == set(itertools.product(Mode, Asked))


_NAMES = st.sampled_from(["a", "b", "c", "d"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("ask"), st.frozensets(st.one_of(_NAMES, st.just("*")))),
            st.tuples(st.just("set"), _NAMES),
            st.tuples(st.just("remove"), _NAMES),
        ),
        max_size=20,
    )
)
def test_an_acking_client_always_ends_with_what_it_asked_for(steps: list[Any]) -> None:
    """Whatever requests and changes, a client that ACKs and merges EDS responses holds
    exactly the current content of every served name it wants, and nothing more is owed."""
    store = ResourceStore()
    s = stream(store)
    held: dict[str, object] = {}
    nonce = ""
    wanted: set[str] = set()
    legacy = wildcard = False
    first = True
    for i, (kind, arg) in enumerate(steps):
        if kind == "ask":
            names = set(arg)
            s.receive(sotw_request(EDS, *sorted(names), nonce=nonce), now=0.0)
            legacy, wildcard = _reference(first, legacy, names)
            # The client forgets a name it stops naming. (One it held only through a wildcard
            # it leaves is not resent when it asks for '*' again: the server keeps what it
            # sent for names no request dropped, as it always has.)
            dropped = wanted - names
            wanted, first = names - {"*"}, False
            if not wildcard:
                held = {n: r for n, r in held.items() if n not in dropped}
        elif kind == "set":
            set_(store, EDS, arg, generation=i)
            s.changed(EDS)
        else:
            store.remove(EDS, arg)
            s.changed(EDS)
        for response in sotw_responses(s):
            nonce = response.nonce
            held.update(zip(names_of(response), response.resources, strict=True))
        assert sotw_responses(s) == []
        for name, stored in store.of_type(EDS).items():
            if not first and (wildcard or name in wanted):
                assert held.get(name) == stored.packed
