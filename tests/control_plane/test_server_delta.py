"""The Delta server stream's rules, sans-I/O: requests and the store in, responses out."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from xdsclient.testing._seeded import SeededBug
from xdsclient.testing._server_delta import TRANSITIONS, Step
from xdsclient.testing._server_stream import Mode
from xdsclient.testing._store import ResourceStore

from .helpers import EDS, delta_request, delta_responses, set_, stream


def test_a_new_stream_gets_what_it_lacks_and_not_what_it_holds() -> None:
    """``initial_resource_versions`` count as sent; only other versions are sent."""
    store = ResourceStore()
    held = set_(store, EDS, "a")
    set_(store, EDS, "b")
    s = stream(store, delta=True)
    s.receive(delta_request(EDS, ("a", "b"), initial={"a": held}), now=0.0)
    [response] = delta_responses(s)
    assert [(r.name, r.version) for r in response.resources] == [
        ("b", store.get(EDS, "b").version)  # type: ignore[union-attr]
    ]


def test_ignoring_initial_versions_is_a_fault_hook() -> None:
    """With IGNORE_INITIAL_VERSIONS everything is sent again on a new stream."""
    store = ResourceStore()
    held = set_(store, EDS, "a")
    s = stream(store, delta=True, bugs=(SeededBug.IGNORE_INITIAL_VERSIONS,))
    s.receive(delta_request(EDS, ("a",), initial={"a": held}), now=0.0)
    assert [r.name for r in delta_responses(s)[0].resources] == ["a"]


def test_a_missing_name_is_sent_once_without_a_body_and_a_removal_is_named() -> None:
    """A subscribed name that does not exist goes out body-less once; a deleted one held by
    the client is in ``removed_resources``."""
    store = ResourceStore()
    set_(store, EDS, "a")
    s = stream(store, delta=True)
    s.receive(delta_request(EDS, ("a", "ghost")), now=0.0)
    [first] = delta_responses(s)
    assert [(r.name, r.HasField("resource")) for r in first.resources] == [
        ("a", True),
        ("ghost", False),
    ]
    store.remove(EDS, "a")
    s.changed(EDS)
    [second] = delta_responses(s)
    assert (list(second.removed_resources), list(second.resources)) == (["a"], [])
    assert delta_responses(s) == []


def test_the_table_covers_every_reachable_mode_and_step() -> None:
    """Every (mode, step) but unsubscribing '*' before any request is in the table."""
    everything = set(itertools.product(Mode, Step))
    unreachable = {(Mode.UNREQUESTED, Step.UNSUBSCRIBE_STAR), *(
        (Mode.LEGACY_WILDCARD, step) for step in Step  # SotW only
    )}  # fmt: skip
    assert set(TRANSITIONS) == everything - unreachable


def test_what_the_wildcard_sent_is_sent_again_when_the_client_comes_back_to_it() -> None:
    """A client may drop what it held only through ``*`` when it unsubscribes ``*``; coming back
    to ``*`` gets it sent again (found by the property below: the server took it as held)."""
    store = ResourceStore()
    s = stream(store, delta=True)
    s.receive(delta_request(EDS, (), ()), now=0.0)  # the first request names nothing: wildcard
    set_(store, EDS, "b")
    s.changed(EDS)
    [first] = delta_responses(s)
    assert [r.name for r in first.resources] == ["b"]
    s.receive(delta_request(EDS, (), ("*",)), now=0.0)  # leaves the wildcard
    assert delta_responses(s) == []
    s.receive(delta_request(EDS, ("*",), ()), now=0.0)  # comes back to the wildcard
    [again] = delta_responses(s)
    assert [(r.name, r.HasField("resource")) for r in again.resources] == [("b", True)]


_NAMES = st.sampled_from(["a", "b", "c", "*"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("sub"), st.frozensets(_NAMES), st.frozensets(_NAMES)),
            st.tuples(st.just("set"), _NAMES.filter(lambda n: n != "*"), st.none()),
            st.tuples(st.just("remove"), _NAMES.filter(lambda n: n != "*"), st.none()),
        ),
        max_size=20,
    )
)
def test_a_client_applying_deltas_holds_exactly_what_it_wants(steps: list[Any]) -> None:
    """Whatever subscriptions and changes, a client applying each response (and forgetting
    what it unsubscribes) holds the current version of every served name it wants."""
    store = ResourceStore()
    s = stream(store, delta=True)
    held: dict[str, str] = {}
    names: set[str] = set()
    wildcard = None
    for kind, first, second in steps:
        if kind == "sub":
            subscribe, unsubscribe = sorted(first), sorted(second - first)
            s.receive(delta_request(EDS, tuple(subscribe), tuple(unsubscribe)), now=0.0)
            if wildcard is None:
                wildcard = not subscribe
            wildcard = (wildcard or "*" in subscribe) and "*" not in unsubscribe
            names = (names | set(subscribe)) - set(unsubscribe) - {"*"}
            held = {n: v for n, v in held.items() if wildcard or n in names}
        else:
            if kind == "set":
                set_(store, EDS, first)
            else:
                store.remove(EDS, first)
            s.changed(EDS)
        for response in delta_responses(s):
            for resource in response.resources:
                if resource.HasField("resource"):
                    held[resource.name] = resource.version
            for name in response.removed_resources:
                del held[name]
        assert delta_responses(s) == []
        if wildcard is None:
            continue
        served = store.of_type(EDS)
        expected = {n: st.version for n, st in served.items() if wildcard or n in names}
        assert held == expected
