"""Every name a response gives is taken in canonical form, so a resource spelled another way than
it was requested (an empty xdstp authority written ``xdstp:///`` for ``xdstp:/``, context
parameters in another order) is the same resource: Resource wrappers, Delta names, removals,
aliases, server errors and decoders' errors alike; a malformed xdstp name only makes the NACK."""

from __future__ import annotations

from typing import Any

from tests.builders import (
    CDS,
    cluster,
    connected,
    delta_resource,
    delta_response,
    sotw_response,
    status_of,
    strict_clusters,
    wrapped,
)
from xdsclient import DataError, ResourceChanged, ResourceStatus, Session

C_CORE = "xdstp:/envoy.config.cluster.v3.Cluster/c"  # the key, and what the client requests
A47 = "xdstp:///envoy.config.cluster.v3.Cluster/c"
NOT_FOUND = 5


def federated(name: str, *, timeout_s: int = 5) -> Any:
    message = cluster(name, timeout_s=timeout_s)
    message.eds_cluster_config.service_name = (
        "xdstp:/envoy.config.endpoint.v3.ClusterLoadAssignment/c"
    )
    return message


def _answer(s: Session) -> Any:
    """The ACK or NACK of the last response."""
    return s.requests_to_send(1.0)[-1]


def test_a_sotw_resource_wrapper_spelled_otherwise_updates_the_requested_name() -> None:
    """A `Resource` wrapper named ``xdstp:///...`` around a body named ``xdstp:/...``."""
    s, _ = connected(subscribe={CDS: [C_CORE]})
    response = sotw_response(CDS, [wrapped(federated(C_CORE), name=A47)], version="1", nonce="n")
    (event,) = s.receive(response, 1.0)
    assert isinstance(event, ResourceChanged)
    assert event.name == C_CORE
    assert not _answer(s).HasField("error_detail")


def test_a_full_state_in_another_spelling_does_not_delete_the_resource() -> None:
    """CDS full state: the resource present under another spelling is not absent."""
    s, _ = connected(subscribe={CDS: [C_CORE]})
    s.receive(sotw_response(CDS, [federated(C_CORE)], version="1", nonce="n1"), 1.0)
    events = s.receive(sotw_response(CDS, [federated(A47)], version="2", nonce="n2"), 2.0)
    assert not any(isinstance(e, DataError) for e in events)
    assert status_of(s, CDS, C_CORE) is ResourceStatus.ACKED


def test_two_spellings_of_one_resource_in_one_response_are_a_duplicate() -> None:
    s, _ = connected(subscribe={CDS: [C_CORE]})
    response = sotw_response(CDS, [federated(C_CORE), federated(A47)], version="1", nonce="n")
    s.receive(response, 1.0)
    assert "duplicate resource name" in _answer(s).error_detail.message


def test_a_decoder_s_error_naming_another_spelling_reaches_the_resource() -> None:
    s, _ = connected(strict_clusters(), subscribe={CDS: [C_CORE]})
    response = sotw_response(CDS, [federated(A47, timeout_s=99)], version="1", nonce="n")
    (event,) = s.receive(response, 1.0)
    assert isinstance(event, DataError)
    assert event.name == C_CORE
    assert status_of(s, CDS, C_CORE) is ResourceStatus.NACKED


def test_a_server_error_naming_another_spelling_reaches_the_resource() -> None:
    s, _ = connected(subscribe={CDS: [C_CORE]})
    response = sotw_response(CDS, [], version="1", nonce="n", errors=[(A47, NOT_FOUND, "gone")])
    (event,) = s.receive(response, 1.0)
    assert isinstance(event, DataError)
    assert event.name == C_CORE


def test_a_delta_removal_in_another_spelling_removes_the_resource() -> None:
    s, _ = connected(delta=True, subscribe={CDS: [C_CORE]})
    s.receive(delta_response(CDS, [delta_resource(A47, federated(A47), version="1")], nonce="1"), 1)
    assert status_of(s, CDS, C_CORE) is ResourceStatus.ACKED
    (event,) = s.receive(delta_response(CDS, nonce="2", removed=(A47,)), 2.0)
    assert isinstance(event, DataError)
    assert event.name == C_CORE


def test_a_delta_alias_in_another_spelling_serves_the_requested_name() -> None:
    s, _ = connected(delta=True, subscribe={CDS: [C_CORE]})
    resource = delta_resource("other", federated("other"), version="1", aliases=(A47,))
    (event,) = s.receive(delta_response(CDS, [resource], nonce="1"), 1.0)
    assert isinstance(event, ResourceChanged)
    assert event.name == C_CORE


def test_a_malformed_xdstp_name_only_makes_the_nack_and_deletes_nothing() -> None:
    """A name that does not parse, or names another type, cannot be attributed: the NACK says
    why, and a full state holding it deletes nothing."""
    s, _ = connected(subscribe={CDS: [C_CORE]})
    s.receive(sotw_response(CDS, [federated(C_CORE)], version="1", nonce="n1"), 1.0)
    listener_name = "xdstp:/envoy.config.listener.v3.Listener/c"
    bad = [federated("xdstp:///envoy.config.cluster.v3.Cluster/x%zz"), federated(listener_name)]
    events = s.receive(sotw_response(CDS, bad, version="2", nonce="n2"), 2.0)
    message = _answer(s).error_detail.message
    assert "resource 0:" in message
    assert "bad percent-encoding" in message
    assert "resource 1:" in message
    assert "not envoy.config.cluster.v3.Cluster" in message
    assert events == []
    assert status_of(s, CDS, C_CORE) is ResourceStatus.ACKED


def test_a_session_takes_the_names_it_is_given_in_canonical_form() -> None:
    """Subscribing, looking up and unsubscribing ``xdstp:///...`` on a `Session` is
    ``xdstp:/...`` on the wire and in the cache, as for the names a response gives."""
    s, (request,) = connected(subscribe={CDS: [A47]})
    assert list(request.resource_names) == [C_CORE]
    s.receive(sotw_response(CDS, [federated(A47)], version="1", nonce="n"), 1.0)
    state = s.resource_state(CDS, A47)
    assert state is not None
    assert state.name == C_CORE
    s.unsubscribe(CDS, A47)
    assert s.subscribed(CDS) == ()
