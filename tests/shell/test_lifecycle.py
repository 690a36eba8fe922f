"""The client owns its tasks and iterations: close ends them all, later calls fail clearly,
and bad arguments fail at the call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.builders import endpoints
from tests.helpers import idle
from tests.shell.conftest import OPTIONS
from xdsclient import (
    CallbackWatcher,
    ClientClosedError,
    ClientOptions,
    DataError,
    Event,
    XdsClient,
)
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import FakeClock, FakeTransport


def _client(fake: FakeTransport, clock: FakeClock) -> XdsClient:
    return XdsClient("fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS)


def _owned_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("xdsclient")]


async def _drain(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


async def test_close_ends_every_iteration_and_every_task(
    fake: FakeTransport, clock: FakeClock
) -> None:
    client = _client(fake, clock)
    await client.start()
    watch = client.watch(ENDPOINT, "a")
    config = client.watch_config("listener")
    client.add_config_watcher("listener", lambda update: None)
    readers = [asyncio.ensure_future(_drain(watch)), asyncio.ensure_future(_drain(config))]
    (await fake.stream()).send([endpoints("a")])
    await idle()
    assert _owned_tasks()
    await client.close()
    async with asyncio.timeout(5):
        events, configs = await asyncio.gather(*readers)
    assert len(events) <= 1
    assert configs == []
    assert _owned_tasks() == []
    assert fake.closed_servers == ["fake:1"]  # and the transport was released


async def test_calls_after_close_raise_a_clear_error(fake: FakeTransport, clock: FakeClock) -> None:
    async with _client(fake, clock) as client:
        pass
    calls = [
        lambda: client.watch(ENDPOINT, "a"),
        lambda: client.watch_config("listener"),
        lambda: client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None)),
        lambda: client.add_config_watcher("listener", lambda update: None),
        lambda: client.resource_state(ENDPOINT, "a"),
        client.resource_states,
    ]
    for call in calls:
        with pytest.raises(ClientClosedError, match="closed"):
            call()
    await client.close()  # idempotent


async def test_a_hung_async_watcher_cannot_block_close(
    fake: FakeTransport, clock: FakeClock
) -> None:
    done = asyncio.Event()
    called = asyncio.Event()

    async def hung(event: Event) -> None:
        called.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await done.wait()  # swallows the cancellation until the test is over

    client = _client(fake, clock)
    await client.start()
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(hung))
    (await fake.stream()).send([endpoints("a")])
    async with asyncio.timeout(5):
        await called.wait()
        await client.close()
    done.set()


async def test_bad_arguments_fail_at_the_call(fake: FakeTransport, clock: FakeClock) -> None:
    with pytest.raises(TypeError, match="server must be an address"):
        XdsClient(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="options must be ClientOptions"):
        XdsClient("a:1", options={"delta": True})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delta must be True or False"):
        XdsClient("a:1", delta="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does_not_exist_timeout must be positive"):
        ClientOptions(does_not_exist_timeout=0)
    async with _client(fake, clock) as client:
        with pytest.raises(TypeError, match="on_resource_changed"):
            client.add_watcher(CLUSTER, "a", object())  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            client.watch(CLUSTER, "a", buffer=0)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="resource_type"):
            client.watch(42, "a")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="resource name"):
            client.watch(CLUSTER, None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="callable"):
            client.add_config_watcher("l", "not a callback")  # type: ignore[arg-type]
        await idle()
        assert fake.open_attempts == 0  # nothing was subscribed by the failed calls


async def test_using_a_client_before_start_says_how_to_start_it() -> None:
    client = XdsClient("a:1")
    with pytest.raises(RuntimeError, match="async with XdsClient"):
        client.watch(CLUSTER, "a")


async def test_an_xdstp_name_of_an_unconfigured_authority_is_a_data_error_for_that_watch(
    fake: FakeTransport, clock: FakeClock
) -> None:
    async with _client(fake, clock) as client:
        name = "xdstp://mesh.example/envoy.config.cluster.v3.Cluster/a"
        async with client.watch(CLUSTER, name) as events:
            event = await anext(aiter(events))
        assert isinstance(event, DataError)
        assert "authority 'mesh.example'" in str(event.error)
        assert fake.open_attempts == 0


async def test_an_xdstp_name_of_another_type_is_refused_at_the_call(
    fake: FakeTransport, clock: FakeClock
) -> None:
    async with _client(fake, clock) as client:
        with pytest.raises(
            ValueError, match=r"type envoy\.config\.listener\.v3\.Listener, not envoy\.config"
        ):
            client.watch(CLUSTER, "xdstp://m/envoy.config.listener.v3.Listener/a")
