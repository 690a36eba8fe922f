"""REST-JSON against sovereign (a third-party control plane, pinned in the dev extra).

Sovereign is started once for the module, bound to 127.0.0.1 on a free port, with two Python
templates (clusters, endpoints) that serve `STATE`. It is stricter than our own endpoint: it
answers 422 to a request without ``node`` (and to a NACK whose status lacks ``details``),
reads only proto field names, answers 304 when the request's version is current and 404 when
none of the names asked for exists. Its access log (one JSON line per request, in a format set
here) is how a test sees what the server saw.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.children import stop_child_sync
from tests.helpers import eventually
from xdsclient import (
    AmbientError,
    Backoff,
    CallbackWatcher,
    ClientOptions,
    DataError,
    Event,
    ResourceChanged,
    ResourceDoesNotExistError,
    ResourceTimeoutError,
    RestSource,
    TransportError,
    XdsClient,
)
from xdsclient.resources import CLUSTER, ENDPOINT

STATE = {
    "clusters": [
        {
            "name": "c",
            "type": "EDS",
            "eds_cluster_config": {"eds_config": {"ads": {}}},
            "connect_timeout": "3s",
        },
        {  # gRPC rejects an EDS config that is neither ads nor self
            "name": "bad",
            "type": "EDS",
            "eds_cluster_config": {"eds_config": {"path_config_source": {"path": "/x"}}},
            "connect_timeout": "1s",
        },
    ],
    "endpoints": [
        {
            "cluster_name": "c",
            "endpoints": [
                {
                    "lb_endpoints": [
                        {
                            "endpoint": {
                                "address": {
                                    "socket_address": {"address": "127.0.0.1", "port_value": 8443}
                                }
                            }
                        }
                    ]
                }
            ],
        }
    ],
}
TEMPLATE = """import json, os

def call(*args, **kwargs):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "state.json")) as f:
        return json.load(f)[{kind!r}]
"""
LOG_FORMAT = {
    "status": "{STATUS_CODE}",
    "path": "{PATH}",
    "names": "{XDS_RESOURCES}",
    "client_version": "{XDS_CLIENT_VERSION}",
    "server_version": "{XDS_SERVER_VERSION}",
    "nack": "{XDS_ERROR_DETAIL}",
}
OPTIONS = ClientOptions(does_not_exist_timeout=1.0, backoff=Backoff(initial=0.05, maximum=0.2))


class Sovereign:
    """A running sovereign process: its URL and its access log."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self._log = log

    def access_log(self) -> list[dict[str, str]]:
        """Every access-log line so far (other lines are skipped)."""
        lines = []
        for line in self._log.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and "status" in entry and "nack" in entry:
                lines.append(entry)
        return lines

    def client(self, **kw: Any) -> XdsClient:
        source = RestSource(url=self.url, refresh_delay=0.02)
        sources = {CLUSTER: source, ENDPOINT: source}
        return XdsClient(node_id="interop", sources=sources, options=OPTIONS, **kw)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def sovereign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sovereign]:
    directory = tmp_path_factory.mktemp("sovereign")
    (directory / "state.json").write_text(json.dumps(STATE))
    templates = []
    for kind in ("clusters", "endpoints"):
        (directory / f"{kind}.py").write_text(TEMPLATE.format(kind=kind))
        path = directory / f"{kind}.py"
        templates.append(f"    - type: {kind}\n      spec: {{protocol: python, path: {path}}}\n")
    (directory / "sovereign.yaml").write_text("templates:\n  default:\n" + "".join(templates))
    port = _free_port()
    env = {
        **os.environ,
        "SOVEREIGN_CONFIG": f"file://{directory / 'sovereign.yaml'}",
        "SOVEREIGN_HOST": "127.0.0.1",
        "SOVEREIGN_PORT": str(port),
        "SOVEREIGN_WORKERS": "1",
        "SOVEREIGN_LOG_FORMAT": json.dumps(LOG_FORMAT),
    }
    log = directory / "sovereign.log"
    executable = Path(sys.executable).with_name("sovereign")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(executable)], cwd=directory, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/healthcheck", process, log)
        yield Sovereign(f"http://127.0.0.1:{port}", log)
    finally:
        stop_child_sync(process, grace=10, terminate=True)


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"sovereign exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"sovereign did not answer {url} within 30 s: {log.read_text()[-2000:]}")


def value_of(client: XdsClient, rtype: Any, name: str) -> Any:
    state = client.resource_state(rtype, name)
    return None if state is None else state.value


async def test_clusters_and_endpoints_arrive_through_rest(sovereign: Sovereign) -> None:
    """A cluster and its endpoints are polled from sovereign, validated and cached."""
    async with sovereign.client() as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        client.add_watcher(ENDPOINT, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: value_of(client, CLUSTER, "c") and value_of(client, ENDPOINT, "c"))
        cluster = value_of(client, CLUSTER, "c")
        assert cluster.proto.connect_timeout.seconds == 3
        assignment = value_of(client, ENDPOINT, "c").proto
        port = assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value
        assert port == 8443
        assert client.stats().servers[sovereign.url].failures == 0


async def test_an_unchanged_version_is_answered_304(sovereign: Sovereign) -> None:
    """Once the client ACKed a version, sovereign answers its polls 304 and nothing is
    applied again."""
    start = len(sovereign.access_log())
    async with sovereign.client() as client:
        client.add_watcher(ENDPOINT, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: value_of(client, ENDPOINT, "c") is not None)
        await eventually(
            lambda: sum(e["status"] == "304" for e in sovereign.access_log()[start:]) >= 3
        )
        stats = client.stats().type_stats(ENDPOINT.type_url)
    ours = [e for e in sovereign.access_log()[start:] if e["path"].endswith("endpoints")]
    assert ours[0]["status"] == "200"
    assert {e["status"] for e in ours[1:]} == {"304"}
    assert {e["client_version"] for e in ours[1:]} == {ours[0]["server_version"]}
    assert (stats.update_attempt, stats.update_success, stats.version) == (
        1,
        1,
        ours[0]["server_version"],
    )


async def test_a_nack_is_seen_by_the_server(sovereign: Sovereign) -> None:
    """A rejected cluster is NACKed, and sovereign reads the NACK's error_detail."""
    start = len(sovereign.access_log())
    seen: list[Event] = []
    async with sovereign.client() as client:
        client.add_watcher(CLUSTER, "bad", CallbackWatcher(seen.append))
        await eventually(lambda: any(e["nack"] != "-" for e in sovereign.access_log()[start:]))
        assert client.stats().type_stats(CLUSTER.type_url).update_rejected >= 1
    nack = next(e for e in sovereign.access_log()[start:] if e["nack"] != "-")
    assert nack["status"] in {"200", "304"}  # read, not refused (422)
    assert 'Cluster "bad"' in nack["nack"]
    assert "must be ads or self" in nack["nack"]
    assert isinstance(seen[0], DataError)


async def test_a_missing_name_is_reported_as_does_not_exist_within_the_timer(
    sovereign: Sovereign,
) -> None:
    """A name sovereign does not serve, asked for beside one it does, is reported missing once
    the does-not-exist timer (1 s here) runs out."""
    seen: list[Event] = []
    async with sovereign.client() as client:
        client.add_watcher(ENDPOINT, "c", CallbackWatcher(lambda event: None))
        client.add_watcher(ENDPOINT, "missing", CallbackWatcher(seen.append))
        started = time.monotonic()
        await eventually(lambda: bool(seen), timeout=3.0)
        elapsed = time.monotonic() - started
    assert isinstance(seen[0], DataError)
    assert isinstance(seen[0].error, ResourceTimeoutError | ResourceDoesNotExistError)
    assert 0.9 <= elapsed < 2.5


async def test_a_name_alone_that_sovereign_lacks_is_answered_404_a_failed_poll(
    sovereign: Sovereign,
) -> None:
    """Sovereign answers 404 when none of the names asked for exists: a failed poll, reported
    to the watcher as a connectivity error (it says nothing about the name)."""
    seen: list[Event] = []
    async with sovereign.client() as client:
        client.add_watcher(CLUSTER, "nowhere", CallbackWatcher(seen.append))
        await eventually(lambda: bool(seen))
    assert isinstance(seen[0], DataError | AmbientError)
    assert isinstance(seen[0].error, TransportError)
    assert "HTTP 404" in str(seen[0].error)
    assert not isinstance(seen[0], ResourceChanged)
