"""`XdsClient.stats()`: Envoy's subscription counters after scripted exchanges, on the
in-memory transport with a fake clock."""

from __future__ import annotations

from tests.builders import EDS, endpoints, invalid_endpoints
from tests.helpers import idle
from xdsclient import CallbackWatcher, TransportError, TypeStats, XdsClient
from xdsclient.resources import ENDPOINT
from xdsclient.testing import FakeClock, FakeTransport


async def test_accepted_rejected_and_empty_responses_are_counted_with_the_version(
    fake: FakeTransport, client: XdsClient, delta: bool
) -> None:
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")], version="1")
    await idle()
    stream.send([invalid_endpoints("a")], version="2")
    await idle()
    stream.send([], type_url=EDS, version="3")
    await idle()
    stats = client.stats()
    server = stats.servers["fake:1"]
    assert server.connected_state == 1
    assert server.failures == 0
    assert server.types[EDS] == TypeStats(
        update_attempt=3,
        update_success=2,
        update_rejected=1,
        update_empty=1,
        version="" if delta else "3",  # Delta: the responses' system_version_info (unset)
    )
    assert stats.type_stats(EDS) == server.types[EDS]


async def test_a_server_down_is_one_failure_and_a_lost_stream_a_failure_of_its_types(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    fake.refuse(TransportError("xDS server down"))
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    for _ in range(3):
        await idle()
        clock.advance(60)
    server = client.stats().servers["fake:1"]
    assert (server.connected_state, server.failures) == (0, 1)
    # Envoy counts a connection failure for every watched type, requested or not yet
    assert dict(server.types) == {EDS: TypeStats(update_attempt=1, update_failure=1)}
    fake.accept()
    clock.advance(60)
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await idle()
    assert client.stats().servers["fake:1"].connected_state == 1
    stream.fail()  # after a response: no failure (gRFC A57)
    second = await fake.stream()
    await second.request()
    second.fail()  # before any response: a connectivity failure
    await idle()
    server = client.stats().servers["fake:1"]
    assert (server.connected_state, server.failures) == (0, 2)
    assert server.types[EDS].update_failure == 2
    assert server.types[EDS].update_attempt == 3  # the failures and the response


async def test_stats_add_up_over_servers_and_are_empty_before_anything_happens(
    fake: FakeTransport, clock: FakeClock
) -> None:
    async with XdsClient("fake:1", node_id="n", transport=fake, clock=clock) as client:
        assert client.stats().servers == {}
        assert client.stats().type_stats(EDS) == TypeStats()
