"""Filesystem subscriptions: how a file may change, and what a bad file does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from envoy.config.cluster.v3 import cluster_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import json_format

from tests.builders import cluster
from tests.helpers import eventually
from tests.sources.conftest import OPTIONS, timeout_of
from xdsclient import (
    AmbientError,
    ClientOptions,
    DataError,
    FileSource,
    ResourceChanged,
    ResourceStatus,
    TransportError,
    XdsClient,
    load_bootstrap,
)
from xdsclient._transports._base import StreamSpec
from xdsclient._transports._file import FileStream, FileTransport, Settler
from xdsclient._transports._formats import FORMATS, FileFormat, dump_response, parse_response
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane, FakeClock


def response(*messages: Any, version: str = "1") -> Any:
    result = discovery_pb2.DiscoveryResponse(type_url=CLUSTER.type_url, version_info=version)
    for message in messages:
        result.resources.add().Pack(message)
    return result


def write(path: Path, *messages: Any, version: str = "1") -> None:
    """Atomically replace ``path`` with a response of ``messages``."""
    kind = next(k for suffix, k in FORMATS.items() if path.name.endswith(suffix))
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(dump_response(response(*messages, version=version), kind))
    os.replace(temporary, path)


def client_for(path: Path, **kw: Any) -> XdsClient:
    return XdsClient(
        node_id="n", sources={CLUSTER: FileSource(path=str(path), **kw)}, options=OPTIONS
    )


@pytest.mark.parametrize("suffix", sorted(FORMATS))
def test_every_format_reads_back_what_was_written(suffix: str) -> None:
    message = response(cluster("c", timeout_s=3), version="7")
    assert parse_response(dump_response(message, FORMATS[suffix]), FORMATS[suffix]) == message


async def test_an_in_place_rewrite_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "cds.json"
    write(path, cluster("c", timeout_s=1))
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _ignore())
        await eventually(lambda: timeout_of(client) == 1)
        path.write_bytes(dump_response(response(cluster("c", timeout_s=2)), FileFormat.JSON))
        await eventually(lambda: timeout_of(client) == 2)


async def test_a_symlink_swap_in_a_watched_directory_is_seen(tmp_path: Path) -> None:
    # The Kubernetes ConfigMap layout: config/cds.json -> ..data/cds.json, ..data -> a version.
    config = tmp_path / "config"
    config.mkdir()
    for version, seconds in (("v1", 1), ("v2", 2)):
        (config / version).mkdir()
        write(config / version / "cds.json", cluster("c", timeout_s=seconds))
    (config / "..data").symlink_to("v1")
    (config / "cds.json").symlink_to("..data/cds.json")
    async with client_for(config / "cds.json", watched_directory=str(config)) as client:
        client.add_watcher(CLUSTER, "c", _ignore())
        await eventually(lambda: timeout_of(client) == 1)
        (config / "..data_tmp").symlink_to("v2")
        os.replace(config / "..data_tmp", config / "..data")
        await eventually(lambda: timeout_of(client) == 2)


async def test_a_deleted_file_keeps_the_last_values_until_it_is_back(tmp_path: Path) -> None:
    path = tmp_path / "cds.yaml"
    write(path, cluster("c", timeout_s=1))
    seen: list[Any] = []
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await eventually(lambda: timeout_of(client) == 1)
        path.unlink()
        await eventually(lambda: any(isinstance(e, AmbientError) for e in seen))
        error = next(e for e in seen if isinstance(e, AmbientError)).error
        assert isinstance(error, TransportError)
        assert str(path) in str(error)
        assert timeout_of(client) == 1
        write(path, cluster("c", timeout_s=2))
        await eventually(lambda: timeout_of(client) == 2)


async def test_a_half_written_file_is_an_error_naming_the_file_and_loses_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cds.json"
    write(path, cluster("c", timeout_s=1))
    seen: list[Any] = []
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await eventually(lambda: timeout_of(client) == 1)
        whole = dump_response(response(cluster("c", timeout_s=2)), FileFormat.JSON)
        path.write_bytes(whole[: len(whole) // 2])
        await eventually(lambda: any(isinstance(e, AmbientError) for e in seen))
        error = str(next(e for e in seen if isinstance(e, AmbientError)).error)
        assert str(path) in error
        assert "not a valid DiscoveryResponse" in error
        path.write_bytes(whole)
        await eventually(lambda: timeout_of(client) == 2)


async def test_a_file_changed_a_hundred_times_a_second_ends_at_the_last_content_in_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cds.pb"
    write(path, cluster("c", timeout_s=1))
    seen: list[int] = []

    def record(event: Any) -> None:
        if isinstance(event, ResourceChanged):
            seen.append(event.value.proto.connect_timeout.seconds)

    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _Callback(record))
        await eventually(lambda: seen == [1])
        for seconds in range(2, 102):
            write(path, cluster("c", timeout_s=seconds), version=str(seconds))
            await asyncio.sleep(0.01)
        await eventually(lambda: bool(seen) and seen[-1] == 101)
        assert seen == sorted(set(seen))  # nothing out of order or repeated


async def test_a_resource_missing_from_the_file_does_not_exist_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cds.json"
    write(path, cluster("other"))
    seen: list[Any] = []
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await eventually(lambda: bool(seen))
        assert isinstance(seen[0], DataError)
        state = client.resource_state(CLUSTER, "c")
        assert state is not None
        assert state.status is ResourceStatus.DOES_NOT_EXIST


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        (b"x" * 2048, ".json", "exceed max_receive_message_length"),
        (b"[" * 200 + b"]" * 200, ".json", "not a valid DiscoveryResponse"),
        (b"a: " + b"[" * 200, ".yaml", "not a valid DiscoveryResponse"),
        (b"\xff\xfe", ".json", "not a valid DiscoveryResponse"),
        (b"{}", ".txt", "unknown extension"),
    ],
)
async def test_hostile_or_unreadable_files_are_clear_errors(
    tmp_path: Path, content: bytes, suffix: str, message: str
) -> None:
    path = tmp_path / f"cds{suffix}"
    path.write_bytes(content)
    options = ClientOptions(max_receive_message_length=1024)
    if suffix == ".txt":
        with pytest.raises(Exception, match=message):
            async with XdsClient(
                node_id="n", sources={CLUSTER: FileSource(path=str(path))}, options=options
            ) as client:
                client.watch(CLUSTER, "c").cancel()
        return
    seen: list[Any] = []
    async with XdsClient(
        node_id="n", sources={CLUSTER: FileSource(path=str(path))}, options=options
    ) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await eventually(lambda: bool(seen))
        assert isinstance(seen[0], DataError)
        assert message in str(seen[0].error)
        assert str(path) in str(seen[0].error)


async def test_too_many_resources_in_a_file_are_rejected_whole(tmp_path: Path) -> None:
    path = tmp_path / "cds.pb"
    write(path, *(cluster(f"c{i}") for i in range(5)))
    seen: list[Any] = []
    options = ClientOptions(max_resources_per_response=3, does_not_exist_timeout=0.2)
    async with XdsClient(
        node_id="n", sources={CLUSTER: FileSource(path=str(path))}, options=options
    ) as client:
        client.add_watcher(CLUSTER, "c0", _collect(seen))
        await eventually(lambda: bool(seen))
        assert isinstance(seen[0], DataError)
        state = client.resource_state(CLUSTER, "c0")
        assert state is not None
        assert state.value is None


async def test_the_bootstrap_names_sources_per_type(tmp_path: Path) -> None:
    async with ControlPlane() as cp:
        cp.set(cluster("c", timeout_s=4))
        path = tmp_path / "cds.yaml"
        cp.write_file(path, CLUSTER.type_url)
        config = load_bootstrap(
            {"node": {"id": "n"}, "xdsclient_sources": {"clusters": {"path": str(path)}}}
        )
        async with XdsClient(bootstrap=config, options=OPTIONS) as client:
            client.add_watcher(CLUSTER, "c", _ignore())
            await eventually(lambda: timeout_of(client) == 4)


# ------------------------------------------------------------------------------ partial reads

INODE = 7


def test_a_file_that_did_not_change_is_not_read_again() -> None:
    """Nothing is due while the stat is the one last read and no event came."""
    settler = Settler(0.5, (INODE, 10, 1))
    assert settler.due((INODE, 10, 1), 100.0) is None
    assert settler.waiting_until is None


def test_a_new_file_at_the_path_is_read_at_once() -> None:
    """An atomic move (another inode), a file appearing or one disappearing: read now."""
    settler = Settler(0.5, (INODE, 10, 1))
    assert settler.due((INODE + 1, 99, 2), 100.0) == 100.0
    assert settler.due(None, 100.0) == 100.0
    assert Settler(0.5, None).due((INODE, 10, 1), 100.0) == 100.0


def test_an_in_place_write_is_read_once_it_has_settled() -> None:
    """The same file changed: readable only after its stat stayed the same for the interval."""
    settler = Settler(0.5, (INODE, 10, 1))
    assert settler.due((INODE, 20, 2), 100.0) == 100.5
    assert settler.due((INODE, 20, 2), 100.4) == 100.5
    assert settler.waiting_until == 100.5
    assert settler.due((INODE, 20, 2), 100.5) == 100.5  # due: the caller reads now


def test_every_further_write_restarts_the_settle_interval() -> None:
    """A change in size or time restarts the wait."""
    settler = Settler(0.5, (INODE, 10, 1))
    settler.due((INODE, 20, 2), 100.0)
    assert settler.due((INODE, 30, 3), 100.4) == 100.9
    assert settler.due((INODE, 30, 4), 100.8) == 101.3
    assert settler.due((INODE, 30, 4), 101.0) == 101.3


def test_change_events_in_a_busy_directory_never_postpone_a_read() -> None:
    """An event with the stat unchanged starts a wait (a rewrite hidden by a coarse file time)
    but does not prolong one: other files' events must not starve the watched one."""
    settler = Settler(0.5, (INODE, 10, 1))
    assert settler.due((INODE, 10, 1), 100.0, event=True) == 100.5
    assert settler.due((INODE, 10, 1), 100.3, event=True) == 100.5
    assert settler.due((INODE, 10, 1), 100.5, event=True) == 100.5


def test_an_atomic_move_during_an_in_place_write_is_read_at_once() -> None:
    """A rename over the file ends the wait: the moved file is complete."""
    settler = Settler(0.5, (INODE, 10, 1))
    settler.due((INODE, 20, 2), 100.0)
    assert settler.due((INODE + 1, 40, 4), 100.1) == 100.1


def test_after_a_read_the_read_stat_is_the_reference() -> None:
    """`done` ends the wait; the same stat is then unchanged, a change of event waits again."""
    settler = Settler(0.5, (INODE, 10, 1))
    settler.due((INODE, 20, 2), 100.0)
    settler.done((INODE, 20, 2))
    assert settler.waiting_until is None
    assert settler.due((INODE, 20, 2), 101.0) is None
    assert settler.due((INODE, 20, 2), 101.0, event=True) == 101.5


def _yaml_type_url_first(*clusters: Any, version: str) -> bytes:
    """A response as YAML with ``type_url`` first, as people write it: every prefix that ends
    between two resources is a valid response holding fewer resources."""
    data = json.loads(json_format.MessageToJson(response(*clusters, version=version)))
    ordered = {"type_url": data["typeUrl"], "version_info": version, "resources": data["resources"]}
    return yaml.safe_dump(ordered, sort_keys=False).encode()


@contextlib.asynccontextmanager
async def _stream(path: Path, clock: FakeClock) -> AsyncIterator[FileStream]:
    transport = FileTransport(FileSource(path=str(path)), OPTIONS, clock=clock, poll_interval=0.05)
    stream = await transport.open(StreamSpec(type_url=CLUSTER.type_url, delta=False))
    try:
        yield stream
    finally:
        stream.close()
        await transport.close()


def _names(message: Any) -> list[str]:
    """The names of the clusters in a response."""
    names = []
    for item in message.resources:
        value = cluster_pb2.Cluster()
        item.Unpack(value)
        names.append(value.name)
    return names


async def test_a_half_written_file_is_never_applied_and_the_completed_one_is(
    tmp_path: Path,
) -> None:
    """An in-place rewrite cut between two resources (valid YAML) is not read; once the write
    is complete and the file has settled on the client's clock, the whole file is."""
    path = tmp_path / "cds.yaml"
    path.write_bytes(_yaml_type_url_first(cluster("c1"), cluster("c2"), version="1"))
    whole = _yaml_type_url_first(cluster("c1"), cluster("c2", timeout_s=9), version="2")
    cut = whole.index(b"- '@type'", whole.index(b"name: c1"))
    assert _names(parse_response(whole[:cut], FileFormat.YAML)) == ["c1"]  # the prefix is valid
    clock = FakeClock(100.0)
    async with _stream(path, clock) as stream:
        assert _names(await stream.read()) == ["c1", "c2"]
        with open(path, "r+b") as file:  # rewritten in place, not moved
            file.truncate(0)
            file.write(whole[:cut])
            file.flush()
            reading = asyncio.ensure_future(stream.read())
            try:
                await eventually(lambda: stream.waiting_until == 100.5)  # it saw the half file
                clock.advance(0.3)
                file.write(whole[cut:])
                file.flush()
                await eventually(lambda: stream.waiting_until == 100.8)  # it saw the whole file
                assert not reading.done()
                clock.advance(0.5)
                message = await asyncio.wait_for(reading, 5)
            finally:
                reading.cancel()
    assert message.version_info == "2"
    assert _names(message) == ["c1", "c2"]


async def test_an_atomic_move_is_applied_at_once(tmp_path: Path) -> None:
    """A file renamed over the watched one is read without waiting on the clock."""
    path = tmp_path / "cds.yaml"
    write(path, cluster("c1"), version="1")
    async with _stream(path, FakeClock(100.0)) as stream:
        await stream.read()
        write(path, cluster("c1"), cluster("c2"), version="2")
        message = await asyncio.wait_for(stream.read(), 5)
    assert _names(message) == ["c1", "c2"]


@pytest.mark.parametrize(
    ("content", "suffix", "reason"),
    [
        (b"", ".pb", "the file is empty"),
        (b"  \n", ".yaml", "the file is empty"),
        (dump_response(discovery_pb2.DiscoveryResponse(version_info="2"), FileFormat.BINARY), ".pb",
         "has no type_url"),
        (b"version_info: '2'\nresources: []\n", ".yaml", "has no type_url"),
    ],
)  # fmt: skip
async def test_an_empty_file_or_one_without_type_url_keeps_the_last_values(
    tmp_path: Path, content: bytes, suffix: str, reason: str
) -> None:
    """Not a state of the world with nothing in it: an error, and the cached value stays."""
    path = tmp_path / f"cds{suffix}"
    write(path, cluster("c", timeout_s=1))
    seen: list[Any] = []
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await eventually(lambda: timeout_of(client) == 1)
        temporary = tmp_path / "next"
        temporary.write_bytes(content)
        os.replace(temporary, path)
        await eventually(lambda: any(isinstance(e, AmbientError) for e in seen))
        error = str(next(e for e in seen if isinstance(e, AmbientError)).error)
        assert reason in error
        assert str(path) in error
        assert timeout_of(client) == 1
        assert not any(isinstance(e, DataError) for e in seen)


async def test_the_warning_for_a_rejected_file_names_the_rejected_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log line says which version was rejected, and which one is kept."""
    path = tmp_path / "cds.json"
    write(path, cluster("c", timeout_s=1), version="v1")
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _ignore())
        await eventually(lambda: timeout_of(client) == 1)
        invalid = cluster("c")
        invalid.eds_cluster_config.eds_config.path_config_source.path = "/x"
        with caplog.at_level(logging.WARNING, logger="xdsclient.transport.file"):
            write(path, invalid, version="v2")
            await eventually(lambda: any("rejected" in r.getMessage() for r in caplog.records))
    line = next(r.getMessage() for r in caplog.records if "rejected" in r.getMessage())
    assert "rejected version v2 (keeping v1)" in line
    assert str(path) in line


class _Callback:
    def __init__(self, function: Any) -> None:
        self._function = function

    def on_resource_changed(self, event: Any) -> None:
        self._function(event)

    def on_ambient_error(self, event: Any) -> None:
        self._function(event)


def _collect(seen: list[Any]) -> _Callback:
    return _Callback(seen.append)


def _ignore() -> _Callback:
    return _Callback(lambda event: None)
