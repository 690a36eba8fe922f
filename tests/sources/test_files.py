"""Filesystem subscriptions: how a file may change, and what a bad file does."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from envoy.service.discovery.v3 import discovery_pb2

from tests.builders import cluster
from tests.sources.conftest import OPTIONS, timeout_of, until
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
from xdsclient._transports._formats import FORMATS, dump_response, parse_response
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


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
        await until(lambda: timeout_of(client) == 1)
        path.write_bytes(dump_response(response(cluster("c", timeout_s=2)), "json"))
        await until(lambda: timeout_of(client) == 2)


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
        await until(lambda: timeout_of(client) == 1)
        (config / "..data_tmp").symlink_to("v2")
        os.replace(config / "..data_tmp", config / "..data")
        await until(lambda: timeout_of(client) == 2)


async def test_a_deleted_file_keeps_the_last_values_until_it_is_back(tmp_path: Path) -> None:
    path = tmp_path / "cds.yaml"
    write(path, cluster("c", timeout_s=1))
    seen: list[Any] = []
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await until(lambda: timeout_of(client) == 1)
        path.unlink()
        await until(lambda: any(isinstance(e, AmbientError) for e in seen))
        error = next(e for e in seen if isinstance(e, AmbientError)).error
        assert isinstance(error, TransportError)
        assert str(path) in str(error)
        assert timeout_of(client) == 1
        write(path, cluster("c", timeout_s=2))
        await until(lambda: timeout_of(client) == 2)


async def test_a_half_written_file_is_an_error_naming_the_file_and_loses_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cds.json"
    write(path, cluster("c", timeout_s=1))
    seen: list[Any] = []
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await until(lambda: timeout_of(client) == 1)
        whole = dump_response(response(cluster("c", timeout_s=2)), "json")
        path.write_bytes(whole[: len(whole) // 2])
        await until(lambda: any(isinstance(e, AmbientError) for e in seen))
        error = str(next(e for e in seen if isinstance(e, AmbientError)).error)
        assert str(path) in error
        assert "not a valid DiscoveryResponse" in error
        path.write_bytes(whole)
        await until(lambda: timeout_of(client) == 2)


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
        await until(lambda: seen == [1])
        for seconds in range(2, 102):
            write(path, cluster("c", timeout_s=seconds), version=str(seconds))
            await asyncio.sleep(0.01)
        await until(lambda: bool(seen) and seen[-1] == 101)
        assert seen == sorted(set(seen))  # nothing out of order or repeated


async def test_a_resource_missing_from_the_file_does_not_exist_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cds.json"
    write(path, cluster("other"))
    seen: list[Any] = []
    async with client_for(path) as client:
        client.add_watcher(CLUSTER, "c", _collect(seen))
        await until(lambda: bool(seen))
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
        await until(lambda: bool(seen))
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
        await until(lambda: bool(seen))
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
            await until(lambda: timeout_of(client) == 4)


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
