"""The watch registry over a real server pool on the fake transport, with no `XdsClient`: one
path for every watcher (batched subscriptions), names from resources as data errors, the last
watcher's departure, the lifecycle, and a config snapshot reached without the client."""

from __future__ import annotations

import ast
import asyncio
import pathlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest

from tests.builders import cluster, endpoints, listener, routes
from tests.helpers import idle
from tests.shell.conftest import OPTIONS
from xdsclient import (
    AuthorityConfig,
    ClientClosedError,
    ClientConfig,
    ConfigWatch,
    DataError,
    Event,
    NodeConfig,
    ResourceDoesNotExistError,
    ResourceStatus,
    ServerConfig,
    XdsConfig,
)
from xdsclient._runtime._tasks import TaskOwner
from xdsclient._shell._pool import ServerPool
from xdsclient._watch._registry import Registry
from xdsclient._watch._watchers import CallbackWatcher
from xdsclient.resources import BUILTIN_TYPES, CLUSTER, ENDPOINT, LISTENER
from xdsclient.testing import FakeClock, FakeStream, FakeTransport

CDS = CLUSTER.type_url
CONFIG = ClientConfig(
    servers=(ServerConfig(uri="fake:1"),),
    node=NodeConfig(id="n"),
    authorities={"known": AuthorityConfig(servers=(ServerConfig(uri="fake:1"),))},
)


@attrs.define
class Parts:
    registry: Registry
    fake: FakeTransport


@asynccontextmanager
async def parts() -> AsyncIterator[Parts]:
    """A registry and the server pool it subscribes through, as the client wires them."""
    tasks = TaskOwner()
    clock = FakeClock()
    types = {rtype.type_url: rtype for rtype in BUILTIN_TYPES}
    registry = Registry(types=types, clock=clock, slow_threshold=1.0, tasks=tasks)
    fake = FakeTransport()
    pool = ServerPool(
        config=CONFIG,
        options=OPTIONS,
        types=types,
        cache=registry.cache,
        clock=clock,
        publish=registry.dispatcher.publish,
        tasks=tasks,
        transport=fake,
    )
    registry.open(pool)
    tasks.start(registry.dispatcher.run(), name="test-dispatcher")
    try:
        yield Parts(registry, fake)
    finally:
        registry.close()
        async with asyncio.timeout(5):
            await pool.close()
            await tasks.close()


class Recorder:
    """A watcher that keeps what it is told."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.watcher = CallbackWatcher(self.events.append)


async def cds_names(stream: FakeStream) -> list[str]:
    """The CDS names of the next CDS request the client writes."""
    async with asyncio.timeout(5):
        while True:
            request = await stream.request()
            if request.type_url == CDS:
                return sorted(request.resource_names)


async def test_a_walk_of_many_names_subscribes_them_in_one_request() -> None:
    """Names added together are subscribed together: one request names all of them."""
    names = [f"c{i:04}" for i in range(1000)]
    async with parts() as p:
        p.registry.resource_state(CDS, "c0000")  # a walk reads before it watches
        handles = p.registry.add_watchers(CDS, names, Recorder().watcher)
        stream = await p.fake.stream()
        assert await cds_names(stream) == names
        assert [(h._type_url, h._name) for h in handles] == [(CDS, n) for n in names]


async def test_a_malformed_name_from_a_resource_is_its_error_never_an_exception() -> None:
    """A malformed xdstp name the walk meets is a data error to its watcher and an unusable
    state to its lookup, and is never subscribed; the others are."""
    bad = "xdstp://known/envoy.config.listener.v3.Listener/not-a-cluster"
    recorder = Recorder()
    async with parts() as p:
        state = p.registry.resource_state(CDS, bad)
        assert state is not None
        assert state.status is ResourceStatus.DOES_NOT_EXIST
        assert isinstance(state.error, ResourceDoesNotExistError)
        p.registry.add_watchers(CDS, [bad, "good"], recorder.watcher)
        stream = await p.fake.stream()
        assert await cds_names(stream) == ["good"]
        await idle()
        assert [(type(e), e.name) for e in recorder.events] == [(DataError, bad)]


async def test_a_name_of_an_unconfigured_authority_is_an_error_and_never_subscribed() -> None:
    """A name whose authority the bootstrap does not configure is that resource's error, for a
    caller's watch and for the walk alike, and reaches no server."""
    unknown = "xdstp://elsewhere/envoy.config.cluster.v3.Cluster/c"
    recorder = Recorder()
    async with parts() as p:
        p.registry.add_watcher(CLUSTER, unknown, recorder.watcher)
        p.registry.add_watchers(CDS, [unknown, "good"], recorder.watcher)
        state = p.registry.resource_state(CDS, unknown)
        assert state is not None
        assert state.status is ResourceStatus.DOES_NOT_EXIST
        stream = await p.fake.stream()
        assert await cds_names(stream) == ["good"]
        await idle()
        assert [(type(e), e.name) for e in recorder.events] == [(DataError, unknown)] * 2


async def test_an_xdstp_name_is_checked_after_its_types_old_style_names_passed() -> None:
    """Once a walk's old-style names of a type passed their checks, a later walk's malformed
    xdstp name of that type is still checked: its watcher's data error, never subscribed."""
    bad = "xdstp://known/envoy.config.listener.v3.Listener/not-a-cluster"
    recorder = Recorder()
    async with parts() as p:
        p.registry.add_watchers(CDS, ["good"], Recorder().watcher)
        stream = await p.fake.stream()
        assert await cds_names(stream) == ["good"]
        p.registry.add_watchers(CDS, ["other", bad], recorder.watcher)
        assert await cds_names(stream) == ["good", "other"]
        await idle()
        assert [(type(e), e.name) for e in recorder.events] == [(DataError, bad)]


async def test_the_last_watcher_to_leave_unsubscribes() -> None:
    """A name stays subscribed while any watcher holds it; the last one leaving drops it."""
    async with parts() as p:
        first = p.registry.add_watcher(CLUSTER, "a", Recorder().watcher)
        second = p.registry.add_watchers(CDS, ["a", "b"], Recorder().watcher)
        stream = await p.fake.stream()
        assert await cds_names(stream) == ["a", "b"]
        first.cancel()
        second[1].cancel()
        assert await cds_names(stream) == ["a"]
        second[0].cancel()
        assert await cds_names(stream) == []


async def test_a_new_watcher_first_receives_the_cached_state() -> None:
    """A watcher added after a response starts from what the cache holds."""
    async with parts() as p:
        p.registry.add_watcher(CLUSTER, "a", Recorder().watcher)
        stream = await p.fake.stream()
        await cds_names(stream)
        stream.send([cluster("a")])
        await cds_names(stream)  # the ACK: the response is in the cache
        late = Recorder()
        p.registry.add_watchers(CDS, ["a"], late.watcher)
        await idle()
        assert [(e.name, getattr(e, "version", None)) for e in late.events] == [("a", "1")]


async def test_a_config_snapshot_needs_no_client() -> None:
    """A response reaches a complete snapshot through the registry alone: the config watch
    subscribes through it and reads the cache through it."""
    async with parts() as p, ConfigWatch(p.registry, "l", "l") as configs:
        stream = await p.fake.stream()
        stream.send([listener("l")])
        stream.send([routes("a")])
        stream.send([cluster("a")])
        stream.send([endpoints("a")])
        async with asyncio.timeout(5):
            config = await anext(configs)
        assert isinstance(config, XdsConfig)
        assert list(config.clusters) == ["a"]
        assert config.clusters["a"].endpoints is not None


async def test_calls_before_open_and_after_close_raise() -> None:
    """Before the client starts, registry calls raise `RuntimeError`; after it closes,
    `ClientClosedError`; it opens once and closes any number of times."""
    types = {rtype.type_url: rtype for rtype in BUILTIN_TYPES}
    registry = Registry(types=types, clock=FakeClock(), slow_threshold=1.0, tasks=TaskOwner())
    with pytest.raises(RuntimeError, match="not started"):
        registry.add_watcher(CLUSTER, "a", Recorder().watcher)
    with pytest.raises(RuntimeError, match="not started"):
        registry.state(CLUSTER, "a")
    registry.close()
    registry.close()
    with pytest.raises(ClientClosedError):
        registry.add_watchers(CDS, ["a"], Recorder().watcher)
    with pytest.raises(ClientClosedError):
        registry.resource_state(ENDPOINT.type_url, "a")
    with pytest.raises(RuntimeError, match="starts once"):
        registry.open(_Nowhere())
    coro = _nothing()
    with pytest.raises(ClientClosedError):
        registry.start_task(coro, name="late")


async def _nothing() -> None:
    return None


class _Nowhere:
    """A subscriber that is never used: the registry refuses it first."""

    def knows(self, authority: str, type_url: str | None = None) -> bool:
        raise AssertionError("not reached")

    def check_type(self, type_url: str) -> None:
        raise AssertionError("not reached")

    def subscribe_all(self, type_url: str, authority_name: str, names: Any) -> None:
        raise AssertionError("not reached")

    def unsubscribe(self, type_url: str, name: str) -> None:
        raise AssertionError("not reached")


WALK_MODULES = ("_registry.py", "_config_watch.py", "_watchers.py", "_dependencies.py")


@pytest.mark.parametrize("module", WALK_MODULES)
def test_the_path_to_a_snapshot_never_imports_the_client(module: str) -> None:
    """The modules a response passes through on its way to a snapshot do not import the
    client, not even for typing."""
    source = pathlib.Path(__file__).parents[2] / "xdsclient" / "_watch" / module
    tree = ast.parse(source.read_text())
    imported = {
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for _ in node.names
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert not {name for name in imported if name.endswith("_client")}, imported
    assert LISTENER  # the walk's root type is importable without the client


async def test_an_empty_name_from_a_resource_is_its_error_never_an_exception() -> None:
    """An empty name the walk meets (an aggregate cluster's child, say) is that resource's
    error, as a malformed one is: no exception, and no subscription to ``""``."""
    recorder = Recorder()
    async with parts() as p:
        p.registry.resource_state(CDS, "good")
        state = p.registry.resource_state(CDS, "")
        assert state is not None
        assert state.status is ResourceStatus.DOES_NOT_EXIST
        assert "cannot be empty" in str(state.error)
        p.registry.add_watchers(CDS, ["", "good"], recorder.watcher)
        stream = await p.fake.stream()
        assert await cds_names(stream) == ["good"]
        await idle()
        assert [(type(e), e.name) for e in recorder.events] == [(DataError, "")]


async def test_the_walks_lookup_of_one_type_answers_as_resource_state_for_every_name() -> None:
    """`resource_lookup` (a walk's reader of one type) gives, for an old-style name before and
    after its type's checks passed, an xdstp name, a malformed or empty one and one of an
    unconfigured authority, what `resource_state` gives: the live entry, or the same error."""
    names = [
        "good",
        "xdstp://known/envoy.config.cluster.v3.Cluster/c",
        "xdstp://elsewhere/envoy.config.cluster.v3.Cluster/c",
        "xdstp://known/envoy.config.listener.v3.Listener/not-a-cluster",
        "",
    ]
    async with parts() as p:
        lookup = p.registry.resource_lookup(CDS)  # before any name of the type was checked
        assert_same_answers(p.registry, lookup, names)
        p.registry.add_watchers(CDS, ["good", names[1]], Recorder().watcher)
        await p.fake.stream()
        assert_same_answers(p.registry, p.registry.resource_lookup(CDS), names)
        assert p.registry.resource_lookup(CDS)("good") is p.registry.cache.entry(CDS, "good")
        assert p.registry.cache.entry(CDS, "good") is not None


async def test_the_walks_lookup_of_many_names_answers_as_resource_state_for_each() -> None:
    """`resource_states` (a walk's reader of many names of one type) gives, in order, what
    `resource_state` gives each name: old-style names before the type's checks passed (the
    first name checks it) and after, mixed with xdstp, malformed and empty names or not."""
    odd = [
        "xdstp://known/envoy.config.cluster.v3.Cluster/c",
        "xdstp://elsewhere/envoy.config.cluster.v3.Cluster/c",
        "",
    ]
    async with parts() as p:
        states = p.registry.resource_states
        assert_same_answers(p.registry, lambda name: states(CDS, [name])[0], ["good", *odd])
        p.registry.add_watchers(CDS, ["good", odd[0]], Recorder().watcher)
        await p.fake.stream()
        for names in (["good", "other", "good"], ["good", *odd, "other"], [*odd, "good"], []):
            assert_same_answers(p.registry, iter(states(CDS, names)).__next__, names, one=False)
        assert states(CDS, ["good", "other"])[0] is p.registry.cache.entry(CDS, "good")
        assert states(ENDPOINT.type_url, ["never-checked", "e"]) == [None, None]  # checks the type


def assert_same_answers(
    registry: Registry, lookup: Any, names: list[str], *, one: bool = True
) -> None:
    """``lookup(name)`` (``one``), or ``lookup()`` in the order of ``names``, answers each name
    as `resource_state` does."""
    for name in names:
        found = lookup(name) if one else lookup()
        expected = registry.resource_state(CDS, name)
        if expected is None or found is None:
            assert found is expected, name
            continue
        assert found.status is expected.status, name
        assert str(found.error) == str(expected.error), name
        assert found.value is expected.value, name
