"""Protocol observers over the in-memory transport with a fake clock: what they are told of
requests, responses, verdicts and connectivity, and that a bad observer breaks nothing."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from tests.builders import EDS, endpoints, raw_any, sotw_response
from tests.helpers import idle
from xdsclient import (
    CallbackWatcher,
    ConnectivityChanged,
    Event,
    ProtocolEvent,
    RequestSent,
    ResourceChanged,
    ResourceUpdate,
    ResponseReceived,
    TransportError,
    XdsClient,
)
from xdsclient._runtime._gc import HOLD_LIMIT
from xdsclient.resources import ENDPOINT
from xdsclient.testing import FakeClock, FakeTransport


def _invalid_endpoints(name: str) -> object:
    message = endpoints(name)
    message.endpoints[0].lb_endpoints[0].load_balancing_weight.value = 0  # must be above 0
    return message


async def test_observers_hear_the_request_the_response_the_verdicts_and_the_ack(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, delta: bool
) -> None:
    told: list[ProtocolEvent] = []
    client.add_observer(told.append)
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    clock.advance(2.0)
    nonce = stream.send([endpoints("a")], version="7")
    await idle()
    connected, subscribe, response, verdict, ack = told
    assert isinstance(subscribe, RequestSent)
    assert subscribe.resource_names == ("a",)
    assert subscribe.nonce == ""
    assert (subscribe.server, subscribe.delta, subscribe.is_nack) == ("fake:1", delta, False)
    assert connected == ConnectivityChanged(server="fake:1", time=0.0, connected=True)
    assert isinstance(response, ResponseReceived)
    assert (response.type_url, response.nonce, response.resource_count) == (EDS, nonce, 1)
    assert response.version_info == ("" if delta else "7")
    assert response.size_bytes > 0
    assert verdict == ResourceUpdate(
        server="fake:1", time=2.0, type_url=EDS, name="a", authority="#old", valid=True
    )
    assert isinstance(ack, RequestSent)
    assert (ack.nonce, ack.is_nack, ack.version_info) == (nonce, False, "" if delta else "7")


async def test_a_rejected_resource_is_an_invalid_verdict_and_a_nack_with_its_reason(
    fake: FakeTransport, client: XdsClient
) -> None:
    told: list[ProtocolEvent] = []
    client.add_observer(told.append)
    for name in ("a", "b"):
        client.add_watcher(ENDPOINT, name, CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a"), _invalid_endpoints("b")])
    await idle()
    verdicts = [e for e in told if isinstance(e, ResourceUpdate)]
    assert [(v.name, v.valid) for v in verdicts] == [("a", True), ("b", False)]
    assert verdicts[1].error is not None
    assert "weight" in verdicts[1].error
    nacks = [e for e in told if isinstance(e, RequestSent) and e.is_nack]
    assert len(nacks) == 1
    assert nacks[0].error_detail is not None
    assert "b" in nacks[0].error_detail


async def test_a_resource_that_cannot_be_named_is_an_invalid_verdict_without_a_name(
    fake: FakeTransport, clock: FakeClock
) -> None:
    async with XdsClient("fake:1", node_id="n", transport=fake, clock=clock) as client:
        told: list[ProtocolEvent] = []
        client.add_observer(told.append)
        client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
        stream = await fake.stream()
        await stream.request()
        garbage = raw_any(EDS, b"\xff\xff")
        stream.respond(sotw_response(EDS, [endpoints("a"), garbage], version="1", nonce="n1"))
        await idle()
    verdicts = [(e.name, e.valid) for e in told if isinstance(e, ResourceUpdate)]
    assert verdicts == [("a", True), ("", False)]


async def test_a_server_that_stays_down_is_one_failure_not_one_per_retry(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    told: list[ProtocolEvent] = []
    client.add_observer(told.append)
    fake.refuse(TransportError("xDS server down"))
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    for _ in range(4):
        await idle()
        clock.advance(60)
    await idle()
    assert fake.open_attempts >= 4
    changes = [e for e in told if isinstance(e, ConnectivityChanged)]
    assert [(c.connected, c.error) for c in changes] == [(True, None), (False, "xDS server down")]
    fake.accept()
    clock.advance(60)
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await idle()
    stream.fail()  # after a response: not a connectivity failure (gRFC A57)
    await fake.stream()
    await idle()
    changes = [e for e in told if isinstance(e, ConnectivityChanged)]
    assert [c.connected for c in changes] == [True, False, True]


async def test_a_raising_observer_is_logged_and_breaks_neither_watchers_nor_observers(
    fake: FakeTransport, client: XdsClient, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: ProtocolEvent) -> None:
        raise RuntimeError("observer bug")

    told: list[ProtocolEvent] = []
    seen: list[Event] = []
    client.add_observer(broken)
    client.add_observer(told.append)
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(seen.append))
    stream = await fake.stream()
    await stream.request()
    with caplog.at_level(logging.ERROR, logger="xdsclient.observe"):
        stream.send([endpoints("a")])
        await idle()
    assert [type(e) for e in seen] == [ResourceChanged]
    assert any(isinstance(e, ResourceUpdate) for e in told)
    assert "observer raised" in caplog.text
    assert "observer bug" in caplog.text
    assert len(stream.requests) == 2  # the subscription and the ACK: the stream goes on


async def test_a_removed_observer_hears_nothing_more_and_removing_twice_is_harmless(
    fake: FakeTransport, client: XdsClient
) -> None:
    told: list[ProtocolEvent] = []
    remove = client.add_observer(told.append)
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    await idle()
    assert told
    remove()
    remove()
    count = len(told)
    stream.send([endpoints("a")])
    await idle()
    assert len(told) == count


async def test_an_observer_without_verdicts_hears_requests_and_responses_only(
    fake: FakeTransport, client: XdsClient
) -> None:
    told: list[ProtocolEvent] = []
    client.add_observer(told.append, verdicts=False)
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")])
    await idle()
    kinds = [type(e) for e in told]
    assert ResponseReceived in kinds
    assert ResourceUpdate not in kinds


async def test_a_server_down_from_the_start_names_the_watched_types_in_its_failure(
    fake: FakeTransport, client: XdsClient
) -> None:
    """The failure of a server that never answered names the types watched on it, though no
    request for them could be written."""
    told: list[ProtocolEvent] = []
    client.add_observer(told.append)
    fake.refuse(TransportError("xDS server down"))
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    await idle()
    failures = [e for e in told if isinstance(e, ConnectivityChanged) and not e.connected]
    assert [f.type_urls for f in failures] == [(EDS,)]
    assert not any(isinstance(e, RequestSent) for e in told)


async def test_the_collector_stays_paused_until_the_ack_of_a_response_is_written(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """A response's objects are collected after its ACK went out, not before: the collector
    is off while the ACK is written, and on again once it is."""
    collecting: list[tuple[str, bool]] = []

    def observe(event: ProtocolEvent) -> None:
        if isinstance(event, RequestSent):
            collecting.append((event.nonce, gc.isenabled()))

    client.add_observer(observe)
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    assert collecting == [("", True)]  # the subscription: no response being applied
    nonce = stream.send([endpoints("a")], version="7")
    await stream.request()
    assert collecting == [("", True), (nonce, False)]
    await idle()
    assert not gc.isenabled()  # held on after the ACK (see the tests below)
    clock.advance(HOLD_LIMIT)
    await idle()
    assert gc.isenabled()


async def test_the_collector_stays_paused_through_the_watchers_and_the_requests_they_make(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """The watchers of a response run, and what they subscribe to is requested, before the
    collector resumes: it resumes `HOLD_LIMIT` after the response."""
    collecting: list[tuple[bool, bool, bool]] = []  # (an ACK, asks for "b", collecting)
    watched: list[bool] = []

    def observe(event: ProtocolEvent) -> None:
        if isinstance(event, RequestSent):
            ack = bool(event.nonce) and "b" not in event.resource_names
            collecting.append((ack, "b" in event.resource_names, gc.isenabled()))

    def on_event(event: Event) -> None:  # as a walk does: the response names another resource
        watched.append(gc.isenabled())
        client.add_watcher(ENDPOINT, "b", CallbackWatcher(lambda event: None))

    client.add_observer(observe)
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(on_event))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")], version="7")
    await stream.request()
    await stream.request()
    assert watched == [False]
    assert collecting[1:] == [(True, False, False), (False, True, False)]
    await idle()
    assert not gc.isenabled()
    clock.advance(HOLD_LIMIT)
    await idle()
    assert gc.isenabled()


async def test_the_collector_stays_paused_over_the_responses_that_follow_within_the_hold(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """A response within `HOLD_LIMIT` of the one that paused the collector keeps it paused
    (as the round trips of a full load do) without extending the hold."""
    seen: list[bool] = []
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: seen.append(gc.isenabled())))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")], version="1")
    await idle()
    clock.advance(HOLD_LIMIT / 2)
    await idle()
    stream.send([endpoints("a", port=81)], version="2")
    await idle()
    assert seen == [False, False]
    clock.advance(HOLD_LIMIT / 2)
    await idle()
    assert gc.isenabled()


async def test_a_slow_watcher_keeps_the_collector_paused_no_longer_than_the_hold_limit(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """An async watcher that does not finish leaves the collector off for `HOLD_LIMIT` at
    most (the stream waits for it before reading on), then on."""
    release = asyncio.Event()
    called: list[bool] = []

    async def on_event(event: Event) -> None:
        called.append(gc.isenabled())
        await release.wait()

    client.add_watcher(ENDPOINT, "a", CallbackWatcher(on_event))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")], version="7")
    await idle()
    assert called == [False]
    assert not gc.isenabled()
    clock.advance(HOLD_LIMIT)
    await idle()
    assert gc.isenabled()
    release.set()
    await idle()
    assert gc.isenabled()
