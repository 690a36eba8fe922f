"""One stream carrying many types (ADS) or one (per-type stream), and request coalescing."""

from __future__ import annotations

from tests.builders import (
    CDS,
    EDS,
    LDS,
    cluster,
    connected,
    delta_resource,
    delta_response,
    endpoints,
    sotw_response,
)
from xdsclient.resources import CLUSTER


def test_ads_multiplexes_types_with_the_node_on_the_first_request_only() -> None:
    _, requests = connected(subscribe={LDS: ["l"], CDS: ["c"], EDS: ["e"]})
    assert [r.type_url for r in requests] == [LDS, CDS, EDS]
    assert [r.HasField("node") for r in requests] == [True, False, False]


def test_a_per_type_session_drives_a_single_type_stream() -> None:
    s, requests = connected(CLUSTER, subscribe={CDS: ["c"]})
    assert s.type_urls == (CDS,)
    assert [(r.type_url, r.HasField("node")) for r in requests] == [(CDS, True)]


def test_interest_changes_before_the_next_send_are_coalesced_into_one_request() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    for name in ("b", "c", "d"):
        s.subscribe(EDS, name)
    s.unsubscribe(EDS, "a")
    (request,) = s.requests_to_send(1.0)
    assert list(request.resource_names) == ["b", "c", "d"]


def test_an_ack_and_pending_interest_changes_go_out_together_without_delay() -> None:
    s, _ = connected(subscribe={CDS: ["a"], EDS: ["a"]})
    s.receive(
        sotw_response(
            CDS,
            [
                cluster("a"),
            ],
            version="1",
            nonce="n1",
        ),
        1.0,
    )
    s.subscribe(EDS, "b")  # e.g. the new cluster needs more endpoints
    requests = s.requests_to_send(1.0)
    assert [(r.type_url, r.response_nonce) for r in requests] == [(CDS, "n1"), (EDS, "")]
    assert list(requests[1].resource_names) == ["a", "b"]


def test_every_response_is_answered_once_in_order_even_when_two_arrive_before_a_send() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n1"), 1.0)
    s.receive(sotw_response(EDS, [endpoints("a", port=2)], version="2", nonce="n2"), 1.0)
    requests = s.requests_to_send(1.0)
    assert [(r.version_info, r.response_nonce) for r in requests] == [("1", "n1"), ("2", "n2")]
    assert s.requests_to_send(1.0) == []


def test_delta_acks_and_diffs_share_a_request() -> None:
    s, _ = connected(delta=True, subscribe={CDS: ["a"]})
    s.receive(
        delta_response(CDS, [delta_resource("a", cluster("a"), version="1")], nonce="n1"), 1.0
    )
    s.receive(delta_response(CDS, [], nonce="n2"), 1.0)
    s.subscribe(CDS, "b")
    requests = s.requests_to_send(1.0)
    assert [(r.response_nonce, list(r.resource_names_subscribe)) for r in requests] == [
        ("n1", ["b"]),
        ("n2", []),
    ]


def test_pending_acks_are_dropped_with_the_stream() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="1", nonce="n1"), 1.0)
    s.disconnect(2.0)
    s.connect(3.0)
    (request,) = s.requests_to_send(3.0)
    assert (request.version_info, request.response_nonce) == ("1", "")


def test_subscribed_lists_the_wildcard_first() -> None:
    s, _ = connected(subscribe={LDS: ["a", "*"]})
    assert s.subscribed(LDS) == ("*", "a")
    assert s.subscribed(CDS) == ()


def test_only_the_last_response_keeps_its_verdicts_so_a_session_holds_one_classify_step() -> None:
    s, _ = connected(subscribe={CDS: ["c"], EDS: ["e"]})
    s.receive(sotw_response(CDS, [cluster("c")], version="1", nonce="n1"), 1.0)
    assert s.verdicts() == [("c", None)]
    s.receive(sotw_response(EDS, [endpoints("e")], version="1", nonce="n2"), 2.0)
    assert s.verdicts() == [("e", None)]
    held = [s.type_state(t) for t in s.type_urls if s.type_state(t).last_classified is not None]
    assert [state.type_url for state in held] == [EDS]  # a classify step a type, at 5,000
    # simulated clients, was 2 KB a client
