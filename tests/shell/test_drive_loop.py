"""The drive loop over the in-memory transport with a fake clock: timers, backoff, TTLs,
flow control and what goes on the wire, without a socket or a real wait."""

from __future__ import annotations

import asyncio
import types

from tests.builders import EDS, delta_resource, delta_response, endpoints, sotw_response, wrapped
from tests.helpers import idle
from xdsclient import (
    AmbientError,
    CallbackWatcher,
    DataError,
    Event,
    ResourceChanged,
    ResourceExpiredError,
    ResourceStatus,
    ResourceTimeoutError,
    TransportError,
    XdsClient,
)
from xdsclient._watch._watchers import ACK_FIRST_LIMIT
from xdsclient.resources import ENDPOINT, _endpoint_wire
from xdsclient.testing import FakeClock, FakeStream, FakeTransport


async def _watching(
    client: XdsClient, fake: FakeTransport, name: str = "a"
) -> tuple[list[Event], FakeStream]:
    seen: list[Event] = []
    client.add_watcher(ENDPOINT, name, CallbackWatcher(seen.append))
    stream = await fake.stream()
    await stream.request()
    return seen, stream


async def test_a_does_not_exist_timer_starts_only_once_the_stream_is_established(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    fake.hold()  # the connection takes a minute to come up (gRFC A57)
    seen: list[Event] = []
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(seen.append))
    await idle()
    clock.advance(60)
    await idle()
    assert seen == []
    fake.release()
    stream = await fake.stream()
    await stream.request()
    clock.advance(14.9)
    await idle()
    assert seen == []
    clock.advance(0.2)
    await idle()
    assert [type(e) for e in seen] == [DataError]
    assert isinstance(seen[0].error, ResourceTimeoutError)  # type: ignore[union-attr]


async def test_reconnects_back_off_on_schedule_and_at_once_after_a_stream_that_answered(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    fake.refuse()
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    await idle()
    assert fake.open_attempts == 1
    for now, attempts in ((0.99, 1), (1.0, 2), (2.59, 2), (2.6, 3)):  # 1 s, then x1.6
        clock.set(now)
        await idle()
        assert fake.open_attempts == attempts, now
    fake.accept()
    clock.set(2.6 + 2.56)
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await idle()
    stream.fail()
    await idle()
    assert fake.open_attempts == 5  # at once: the stream had received a response


async def test_a_connection_failure_reaches_watchers_and_the_cache_until_data_arrives(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    fake.refuse(TransportError("xDS server down"))
    seen: list[Event] = []
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(seen.append))
    await idle()
    assert [type(e) for e in seen] == [DataError]
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.status is ResourceStatus.REQUESTED
    assert isinstance(state.error, TransportError)
    fake.accept()
    clock.advance(1.0)
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await idle()
    assert isinstance(seen[-1], ResourceChanged)
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.error is None


async def test_a_stream_ending_after_a_response_is_no_error_and_resumes_at_the_version(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, delta: bool
) -> None:
    seen, stream = await _watching(client, fake)
    stream.send([endpoints("a")], version="7")
    await idle()
    stream.fail()
    second = await fake.stream()
    first_request = await second.request()
    await idle()
    assert [type(e) for e in seen] == [ResourceChanged]  # gRFC A57: not an error
    if delta:
        assert dict(first_request.initial_resource_versions) == {"a": "7"}
    else:
        assert first_request.version_info == "7"
        assert list(first_request.resource_names) == ["a"]


async def test_a_ttl_expires_on_the_clock_even_while_disconnected(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, delta: bool
) -> None:
    seen, stream = await _watching(client, fake)
    if delta:
        resource = delta_resource("a", endpoints("a"), version="1", ttl=5)
        stream.respond(delta_response(EDS, [resource], nonce="n1"))
    else:
        resource = wrapped(endpoints("a"), name="a", version="1", ttl=5)
        stream.respond(sotw_response(EDS, [resource], version="1", nonce="n1"))
    await idle()
    fake.refuse()
    stream.fail()
    clock.advance(4.9)
    await idle()
    assert [type(e) for e in seen] == [ResourceChanged, AmbientError]  # the failed reconnect
    clock.advance(0.2)
    await idle()
    assert isinstance(seen[-1], DataError)
    assert isinstance(seen[-1].error, ResourceExpiredError)


async def test_a_busy_callback_watcher_holds_back_the_next_read_but_not_the_ack(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    gate = asyncio.Event()
    seen: list[Event] = []

    async def slow(event: Event) -> None:
        seen.append(event)
        await gate.wait()

    client.add_watcher(ENDPOINT, "a", CallbackWatcher(slow))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")], version="1")
    stream.send([endpoints("a", port=2)], version="2")
    await idle()
    assert len(stream.pending_requests()) == 1  # the first response ACKed, the second unread
    gate.set()
    await idle()
    assert len(stream.pending_requests()) == 1
    assert [e.version for e in seen if isinstance(e, ResourceChanged)] == ["1", "2"]


async def test_cancelling_a_watch_unsubscribes_and_nothing_more_is_delivered(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, delta: bool
) -> None:
    seen: list[Event] = []
    handle = client.add_watcher(ENDPOINT, "a", CallbackWatcher(seen.append))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")])
    await idle()
    stream.pending_requests()
    handle.cancel()
    await idle()
    (unsubscribe,) = stream.pending_requests()
    if delta:
        assert list(unsubscribe.resource_names_unsubscribe) == ["a"]
    else:
        assert list(unsubscribe.resource_names) == []
    stream.send([endpoints("a", port=2)], version="2")
    await idle()
    assert len(seen) == 1
    assert client.resource_state(ENDPOINT, "a") is None


async def test_a_watcher_added_at_any_moment_of_an_update_sees_each_version_once(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    _, stream = await _watching(client, fake)
    stream.send([endpoints("a")], version="1")
    await idle()
    stream.send([endpoints("a", port=2)], version="2")
    late: list[list[Event]] = []
    for _ in range(40):
        box: list[Event] = []
        late.append(box)
        client.add_watcher(ENDPOINT, "a", CallbackWatcher(box.append))
        await asyncio.sleep(0)
    await idle()
    for box in late:
        versions = [e.version for e in box if isinstance(e, ResourceChanged)]
        assert versions in (["1", "2"], ["2"]), versions


async def test_ambient_errors_of_a_failed_reconnect_keep_the_cached_value(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen, stream = await _watching(client, fake)
    stream.send([endpoints("a")])
    await idle()
    fake.refuse()
    stream.fail()
    await idle()
    assert [type(e) for e in seen] == [ResourceChanged, AmbientError]
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.status is ResourceStatus.ACKED
    assert isinstance(state.error, TransportError)


async def test_heartbeats_keep_a_resource_past_its_ttl(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, delta: bool
) -> None:
    seen, stream = await _watching(client, fake)

    def send(with_body: bool, nonce: str) -> None:
        body = endpoints("a") if with_body else None
        if delta:
            resource = delta_resource("a", body, version="1", ttl=5)
            stream.respond(delta_response(EDS, [resource], nonce=nonce))
        else:
            wrapper = wrapped(body, name="a", version="1", ttl=5)
            stream.respond(sotw_response(EDS, [wrapper], version="1", nonce=nonce))

    send(True, "n0")
    await idle()
    for beat in range(1, 5):  # a heartbeat every 4 s, for 16 s
        clock.advance(4)
        send(False, f"n{beat}")
        await idle()
    assert [type(e) for e in seen] == [ResourceChanged]  # never expired, never re-delivered
    clock.advance(5)
    await idle()
    assert isinstance(seen[-1], DataError)
    assert isinstance(seen[-1].error, ResourceExpiredError)


async def test_the_ack_is_written_before_the_watchers_of_its_response_run(
    fake: FakeTransport, client: XdsClient
) -> None:
    acked_before_call: list[bool] = []

    def on_event(event: Event) -> None:
        acked_before_call.append(any(r.response_nonce == nonce for r in stream.requests))

    client.add_watcher(ENDPOINT, "a", CallbackWatcher(on_event))
    stream = await fake.stream()
    await stream.request()
    nonce = stream.send([endpoints("a")])
    await idle()
    assert acked_before_call == [True]


async def test_an_updates_endpoints_are_built_after_its_ack_is_written(
    fake: FakeTransport, client: XdsClient
) -> None:
    """Compiled, the session ACKs an assignment it only checked: its localities are still
    unbuilt when its ACK is on the wire, and are built when the watcher first reads them."""
    unbuilt_after_ack: list[tuple[bool, bool]] = []

    def on_event(event: Event) -> None:
        assert isinstance(event, ResourceChanged)
        view = event.value
        acked = any(r.response_nonce == nonce for r in stream.requests)
        unbuilt_after_ack.append((acked, view._priorities is None))
        assert view.priorities[0][0].endpoints[0].port == 8081

    client.add_watcher(ENDPOINT, "a", CallbackWatcher(on_event))
    stream = await fake.stream()
    await stream.request()
    nonce = stream.send([endpoints("a", port=8081)])
    await idle()
    assert unbuilt_after_ack == [(True, _endpoint_wire.COMPILED)]


async def test_a_stream_that_cannot_write_its_ack_holds_the_watchers_up_only_briefly(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    seen, stream = await _watching(client, fake)
    stream.stall_writes()
    stream.send([endpoints("a")])
    await idle()
    assert seen == []  # waiting for the ACK to be written
    clock.advance(ACK_FIRST_LIMIT)
    await idle()
    assert [type(e) for e in seen] == [ResourceChanged]
    assert not stream.pending_requests()  # the ACK is still stuck
    stream.resume_writes()
    await idle()
    assert [r.response_nonce for r in stream.pending_requests()] == ["nonce-1"]


async def test_a_response_is_read_and_applied_while_the_request_before_it_is_being_written(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """A subscription whose write has not finished does not hold up the next response (in a
    full load, the answer to it): it is read and applied, and its ACK written after it."""
    _, stream = await _watching(client, fake)
    stream.stall_writes()
    client.add_watcher(ENDPOINT, "b", CallbackWatcher(lambda event: None))
    await idle()
    nonce = stream.send([endpoints("a")])
    await idle()
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.status is ResourceStatus.ACKED
    assert not stream.pending_requests()
    stream.resume_writes()
    await idle()
    written = stream.pending_requests()
    assert [r.response_nonce for r in written] == ["", nonce]  # the subscription, the ACK
    asked = getattr(written[0], "resource_names_subscribe", None) or written[0].resource_names
    assert "b" in asked


def _drive_loop_locals() -> list[dict[str, object]]:
    """The local variables of every drive loop (`StreamDriver._serve`) now suspended."""
    found = []
    for task in asyncio.all_tasks():
        coro: object = task.get_coro()
        while isinstance(coro, types.CoroutineType):
            if coro.cr_code.co_name == "_serve" and coro.cr_frame is not None:
                found.append(dict(coro.cr_frame.f_locals))
            coro = coro.cr_await
    return found


async def test_the_drive_loop_lets_go_of_a_response_while_its_watchers_run(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """Once a response is applied and ACKed, the drive loop holds neither the message nor its
    events while the watchers run (the walk among them): an update's parsed bytes are freed
    before the next snapshot is built."""
    gate = asyncio.Event()
    seen: list[Event] = []

    async def slow(event: Event) -> None:
        seen.append(event)
        await gate.wait()

    client.add_watcher(ENDPOINT, "a", CallbackWatcher(slow))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")], version="1")
    ack = await stream.request()
    await idle()
    assert ack.response_nonce == "nonce-1"
    assert [type(e) for e in seen] == [ResourceChanged]
    loops = _drive_loop_locals()  # waiting for the watcher, before the next read
    assert len(loops) == 1
    assert loops[0].get("response") is None
    assert not loops[0].get("events")
    gate.set()
