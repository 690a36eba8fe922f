"""``python -m xdsclient watch`` and ``dump`` end to end, in a subprocess, against the test
control plane over gRPC, a file and REST: output, exit statuses, one-line errors."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from envoy.service.status.v3 import csds_pb2
from google.protobuf import json_format

from tests.builders import cluster, endpoints, listener, routes
from tests.cli.helpers import cli as cli  # re-exported: tests/conformance uses it
from tests.cli.helpers import closed_port, interrupted, started
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


@pytest.fixture
def cp_resources() -> list[Any]:
    """What ``cp`` serves: a listener ``l`` whose routes send everything to cluster ``c``."""
    return [listener("l"), routes("c"), cluster("c"), endpoints("c")]


async def test_watch_streams_changes_from_a_server_as_lines_or_json(cp: ControlPlane) -> None:
    status, out, _ = await cli("watch", "cluster", "c", "--server", cp.address, "--count", "1")
    assert status == 0
    assert out.startswith("changed  Cluster c: version")
    status, out, _ = await cli(
        "watch", "cluster", "c", "--server", cp.address, "--count", "1", "--json"
    )
    assert json.loads(out)["event"] == "changed"


async def test_watch_reads_a_file_whose_type_it_learns_from_the_file(
    cp: ControlPlane, tmp_path: Path
) -> None:
    path = tmp_path / "cds.yaml"
    cp.write_file(path, CLUSTER.type_url)
    status, out, _ = await cli("watch", "cluster", "c", "--file", str(path), "--count", "1")
    assert status == 0
    assert "changed  Cluster c" in out


async def test_dump_over_rest_prints_the_csds_dump_of_a_complete_listener(
    cp: ControlPlane,
) -> None:
    url = (await cp.serve_rest()).url
    status, out, _ = await cli("dump", "--listener", "l", "--rest", url, "--json")
    assert status == 0
    dump = json_format.Parse(out, csds_pb2.ClientConfig())
    assert {x.name for x in dump.generic_xds_configs} == {"l", "routes", "c"}


async def test_dump_exits_nonzero_when_something_was_rejected_or_did_not_arrive(
    cp: ControlPlane,
) -> None:
    broken = cluster("c")
    broken.eds_cluster_config.eds_config.path_config_source.path = "/x"  # gRPC rejects it
    cp.set(broken)
    status, out, _ = await cli("dump", "--listener", "l", "--server", cp.address)
    assert status == 5
    assert "NACKED" in out
    assert "eds_config" in out
    status, out, _ = await cli("dump", "--resource", "cluster:nope", "--server", cp.address,
                               "--timeout", "0.5")  # fmt: skip
    assert status == 4
    assert "REQUESTED" in out


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["watch", "--listener", "l", "--bootstrap", "/nonexistent"], 3, "cannot read bootstrap"),
        (["watch", "--server", "127.0.0.1:1"], 2, "watch needs TYPE NAME"),
        (["watch", "thing", "x", "--server", "127.0.0.1:1"], 2, "unknown type 'thing'"),
        (["dump", "--listener", "l", "--file", "/nonexistent.yaml"], 3, "No such file"),
    ],
)
async def test_mistakes_are_one_line_errors_with_distinct_statuses(
    args: list[str], status: int, message: str
) -> None:
    code, _, err = await cli(*args)
    assert code == status
    errors = [line for line in err.splitlines() if line.startswith("xdsclient:")]
    assert len(errors) == 1
    assert message in errors[0]
    assert "Traceback" not in err


async def test_version_is_printed() -> None:
    code, out, _ = await cli("--version")
    assert code == 0
    assert out.startswith("xdsclient ")


def test_the_xdsclient_console_script_is_installed() -> None:
    import subprocess

    script = Path(sys.executable).parent / "xdsclient"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert done.stdout.startswith("xdsclient ")


async def test_a_malformed_bootstrap_is_one_line_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bootstrap.json"
    path.write_text('{"node": {"id": "n"}, "xds_servers": 5}')
    code, _, err = await cli("dump", "--listener", "l", "--bootstrap", str(path))
    assert code == 3
    assert "xds_servers" in err
    assert "Traceback" not in err


async def test_an_unreachable_server_makes_dump_exit_4_with_the_requested_resources() -> None:
    address = f"127.0.0.1:{closed_port()}"
    code, out, err = await cli("dump", "--listener", "l", "--server", address, "--timeout", "1")
    assert code == 4
    assert "REQUESTED" in out
    assert "incomplete after 1 s" in err
    assert "Traceback" not in err


async def test_ctrl_c_ends_a_watch_with_status_130_and_no_traceback(cp: ControlPlane) -> None:
    process, first = await started("watch", "cluster", "c", "--server", cp.address)
    assert first.startswith("changed  Cluster c")
    code, err = await interrupted(process)
    assert code == 130
    assert "Traceback" not in err


async def test_serve_runs_the_demo_for_dump_and_watch_until_ctrl_c() -> None:
    from xdsclient._demo import LISTENER

    process, first = await started("serve", "--port", "0")
    address = first.split(" on ")[1].split()[0]
    try:
        code, out, _ = await cli("dump", "--listener", LISTENER, "--server", address,
                                 "--format", "yaml")  # fmt: skip
        assert code == 0
        dump = yaml.safe_load(out)
        assert {"ACKED"} == {x["clientStatus"] for x in dump["genericXdsConfigs"]}
        code, out, _ = await cli("watch", "--listener", LISTENER, "--server", address,
                                 "--json", "--count", "1")  # fmt: skip
        assert code == 0
        update = json.loads(out)
        assert update["listener"] == LISTENER
        assert update["clusters"]["web"]["endpoints"]
    finally:
        code, err = await interrupted(process)
    assert code == 130
    assert "Traceback" not in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from xdsclient._cli._common import Style

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert Style(_Terminal())("ACKED", "good") == "\x1b[32mACKED\x1b[0m"
    assert Style(io.StringIO())("ACKED", "good") == "ACKED"
    monkeypatch.setenv("NO_COLOR", "1")
    assert Style(_Terminal())("ACKED", "good") == "ACKED"
