"""Shared response bytes, and the faults' hooks on the way out."""

from __future__ import annotations

from xdsclient.testing._encoding import Encoder
from xdsclient.testing._faults import DROP, Faults
from xdsclient.testing._seeded import SeededBug
from xdsclient.testing._store import ResourceStore

from .helpers import EDS, delta_request, names_of, set_, sotw_request, sotw_responses, stream


def test_streams_that_need_the_same_response_share_its_body() -> None:
    """Two streams asking the same get one encoded body, each with its own nonce."""
    store = ResourceStore()
    set_(store, EDS, "a")
    set_(store, EDS, "b")
    encoder = Encoder(Faults())
    one, two = (stream(store, stream_id=i, encoder=encoder) for i in (1, 2))
    for s in (one, two):
        s.receive(sotw_request(EDS, "a", "b"), now=0.0)
    [first], [second] = sotw_responses(one), sotw_responses(two)
    assert (first.nonce, second.nonce) == ("1-1", "2-1")
    first.nonce = second.nonce = ""
    assert first == second
    assert names_of(first) == ["a", "b"]
    assert len(encoder._bodies) == 1


def test_a_mangling_fault_changes_each_response_and_its_record() -> None:
    """With WRONG_TYPE_URL every response, and what the journal records, names the v2 type."""
    store = ResourceStore()
    set_(store, EDS, "a")
    s = stream(store, bugs=(SeededBug.WRONG_TYPE_URL, SeededBug.DUPLICATE_RESOURCE))
    s.receive(sotw_request(EDS, "a"), now=0.0)
    [out] = s.respond(now=0.0)
    assert out.record.type_url == "type.googleapis.com/envoy.api.v2.ClusterLoadAssignment"
    assert out.record.names == ("a", "a")


def test_the_clean_faults_refuse_nothing_and_number_freshly() -> None:
    """`Faults()` is the spec: no request refused, nonces fresh, nothing mangled."""
    faults = Faults()
    request = delta_request(EDS, (), ("never-subscribed",))
    assert faults.refuse(request, first=False, delta=True, subscribed=()) is None
    assert faults.nonce(3, lambda: "3-9") == "3-9"
    assert not faults.mangles
    assert faults.full_state
    assert faults.honour_initial_versions


def test_seeded_refusals_drop_or_end_the_stream() -> None:
    """NODE_REQUIRED drops a later request without a node; PHANTOM_UNSUBSCRIBE_ABORTS ends a
    Delta stream over a name never subscribed."""
    faults = Faults({SeededBug.NODE_REQUIRED, SeededBug.PHANTOM_UNSUBSCRIBE_ABORTS})
    later = delta_request(EDS, (), ("ghost",))
    assert faults.refuse(later, first=False, delta=True, subscribed=()) is DROP
    later.node.id = "n"
    abort = faults.refuse(later, first=False, delta=True, subscribed=())
    assert abort is not None
    assert abort.code == "INVALID_ARGUMENT"
    assert faults.refuse(later, first=False, delta=True, subscribed=("ghost",)) is None
