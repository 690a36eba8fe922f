"""REST-JSON polling over the in-memory transport with a fake clock: every poll stands alone,
so a failed one is a connectivity failure even after responses (backed off, reported, counted).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from tests.builders import EDS, endpoints
from tests.helpers import idle
from tests.shell.conftest import OPTIONS
from xdsclient import (
    AmbientError,
    CallbackWatcher,
    ConnectivityChanged,
    Event,
    ProtocolEvent,
    ResourceChanged,
    RestSource,
    XdsClient,
)
from xdsclient.resources import ENDPOINT
from xdsclient.testing import FakeClock, FakeTransport

URL = "http://rest.example:8080"


@pytest.fixture
async def rest_client(fake: FakeTransport, clock: FakeClock) -> AsyncIterator[XdsClient]:
    sources = {ENDPOINT: RestSource(url=URL, refresh_delay=1.0)}
    async with XdsClient(
        node_id="n", sources=sources, transport=fake, clock=clock, options=OPTIONS
    ) as client:
        yield client


async def test_a_failed_poll_after_a_response_is_backed_off_and_reported(
    fake: FakeTransport, clock: FakeClock, rest_client: XdsClient
) -> None:
    """A poll failing after a good one reaches watchers as an ambient error and is retried only
    after the backoff."""
    seen: list[Event] = []
    rest_client.add_watcher(ENDPOINT, "a", CallbackWatcher(seen.append))
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await idle()
    stream.fail("HTTP 503")
    await idle()
    assert [type(e) for e in seen] == [ResourceChanged, AmbientError]
    assert "HTTP 503" in str(seen[1].error)  # type: ignore[union-attr]
    assert fake.open_attempts == 1
    clock.set(0.99)
    await idle()
    assert fake.open_attempts == 1
    clock.set(1.0)
    await idle()
    assert fake.open_attempts == 2


async def test_consecutive_failed_polls_back_off_longer_and_a_response_resets_it(
    fake: FakeTransport, clock: FakeClock, rest_client: XdsClient
) -> None:
    """Failed polls in a row back off 1 s, then 1.6 s; after a good poll the next failure waits
    1 s again."""
    rest_client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    first = await fake.stream()
    first.send([endpoints("a")])
    await idle()
    first.fail("HTTP 500")
    await idle()
    clock.set(1.0)
    second = await fake.stream()
    second.fail("HTTP 500")
    await idle()
    clock.set(2.59)
    await idle()
    assert fake.open_attempts == 2
    clock.set(2.6)
    third = await fake.stream()
    third.send([endpoints("a")], version="2")
    await idle()
    third.fail("HTTP 500")
    await idle()
    clock.set(3.59)
    await idle()
    assert fake.open_attempts == 3
    clock.set(3.6)
    await idle()
    assert fake.open_attempts == 4


async def test_failed_polls_are_one_connectivity_change_until_a_poll_succeeds(
    fake: FakeTransport, clock: FakeClock, rest_client: XdsClient
) -> None:
    """Observers hear of a failing source once per change, not once per failed poll."""
    told: list[ProtocolEvent] = []
    rest_client.add_observer(told.append)
    rest_client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await idle()

    def changes() -> list[bool]:
        return [e.connected for e in told if isinstance(e, ConnectivityChanged)]

    stream.fail("HTTP 503")
    await idle()
    assert changes() == [True, False]  # the first failed poll, though it followed a good one
    for now in (1.0, 2.6):
        clock.set(now)
        stream = await fake.stream()
        stream.fail("HTTP 503")
        await idle()
    assert changes() == [True, False]
    clock.set(5.16)
    stream = await fake.stream()
    stream.send([endpoints("a")], version="2")
    await idle()
    assert changes() == [True, False, True]
    stats = rest_client.stats()
    assert stats.servers[URL].failures == 1
    assert stats.type_stats(EDS).update_failure == 1


async def test_a_failing_rest_source_is_one_warning_per_change(
    fake: FakeTransport, clock: FakeClock, rest_client: XdsClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A REST source that fails after answering is logged at WARNING once, and once at INFO
    when it answers again."""
    rest_client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await idle()
    with caplog.at_level(logging.INFO, logger="xdsclient.connectivity"):
        for now in (0.0, 1.0, 2.6):
            clock.set(now)
            if now:
                stream = await fake.stream()
            stream.fail("HTTP 503")
            await idle()
        clock.set(5.16)
        stream = await fake.stream()
        stream.send([endpoints("a")], version="2")
        await idle()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.endswith("ivity")]
    assert lines == [
        ("WARNING", f"REST-JSON source {URL} failing: xDS stream to {URL} failed: HTTP 503"),
        ("INFO", f"REST-JSON source {URL} answers again"),
    ]
