"""``xdsclient watch``: prints each resource (a summary, or proto3 JSON), stops at ``--count``
or ``--timeout``, and exits as ``dump`` does when a resource is NACKed or missing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import cli, one_error_line
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


async def test_a_cluster_is_printed_as_a_readable_summary(cp: ControlPlane) -> None:
    """In text, an update names the resource and its version, then says what it configures."""
    status, out, err = await cli("watch", "cluster", "c", "--server", cp.address, "--count", "1")
    assert status == 0, err
    head, summary = out.splitlines()
    assert head.startswith("changed  Cluster c: version ")
    assert head.split()[-1].isdigit()
    assert summary == "  EDS from 'c', RoundRobin, max 1024 requests"


async def test_routes_and_endpoints_are_summarised_by_what_they_send_where(
    cp: ControlPlane,
) -> None:
    """A route configuration shows its virtual hosts and routes; an assignment its endpoints."""
    status, out, _ = await cli("watch", "route", "routes", "--server", cp.address, "--count", "1")
    assert status == 0
    assert out.splitlines()[1:] == ["  virtual host 'vh' for *", "    prefix '/0/' -> c"]
    status, out, _ = await cli("watch", "endpoint", "c", "--server", cp.address, "--count", "1")
    assert status == 0
    assert out.splitlines()[1] == "  priority 0, r (weight 1): 10.0.0.1:8080"
    status, out, _ = await cli("watch", "listener", "l", "--server", cp.address, "--count", "1")
    assert status == 0
    assert out.splitlines()[1] == "  routes from 'routes', filters: router"


async def test_json_prints_the_resource_as_proto3_json(cp: ControlPlane) -> None:
    """With --json, a changed event carries the version and the whole resource."""
    status, out, _ = await cli("watch", "listener", "l", "--server", cp.address, "--count", "1",
                               "--json")  # fmt: skip
    assert status == 0
    event = json.loads(out)
    assert event["event"] == "changed"
    assert event["name"] == "l"
    manager = event["resource"]["apiListener"]["apiListener"]
    assert manager["rds"]["routeConfigName"] == "routes"


async def test_a_nacked_resource_exits_5_as_dump_does(cp: ControlPlane) -> None:
    """``watch ... --count 1`` of a NACKed resource prints the error and exits 5."""
    status, out, err = await cli("watch", "cluster", "bad", "--server", cp.address,
                                 "--count", "1")  # fmt: skip
    assert status == 5
    assert out.startswith("error    Cluster bad: ")
    assert "eds_config: must be ads or self" in out
    assert one_error_line(err) == (
        "xdsclient: not usable: Cluster bad (NACKED: invalid resource: "
        "eds_cluster_config.eds_config: must be ads or self)"
    )


async def test_a_resource_that_does_not_exist_exits_5(cp: ControlPlane) -> None:
    """A resource the server says does not exist (Delta tells at once) makes watch exit 5."""
    status, out, err = await cli("watch", "cluster", "nope", "--server", cp.address,
                                 "--delta", "--count", "1", "--json")  # fmt: skip
    assert status == 5
    assert json.loads(out)["event"] == "error"
    assert one_error_line(err) == (
        "xdsclient: not usable: Cluster nope "
        "(DOES_NOT_EXIST: does not exist: removed by the server)"
    )


async def test_timeout_ends_a_watch_and_nothing_arrived_exits_4(cp: ControlPlane) -> None:
    """``--timeout`` ends the watch; a resource still only requested then exits 4."""
    status, out, err = await cli("watch", "cluster", "nope", "--server", cp.address,
                                 "--timeout", "0.5")  # fmt: skip
    assert status == 4
    assert out == ""
    assert one_error_line(err) == "xdsclient: nothing arrived for Cluster nope (REQUESTED)"


async def test_timeout_before_count_updates_exits_4(cp: ControlPlane) -> None:
    """``--count N`` not reached within ``--timeout`` exits 4, saying how many arrived."""
    status, out, err = await cli("watch", "cluster", "c", "--server", cp.address,
                                 "--count", "2", "--timeout", "0.5")  # fmt: skip
    assert status == 4
    assert out.startswith("changed  Cluster c")
    assert one_error_line(err) == "xdsclient: 1 of 2 updates after 0.5 s"


async def test_timeout_with_everything_usable_exits_0(cp: ControlPlane) -> None:
    """A watch ended by ``--timeout`` with every resource usable exits 0."""
    status, out, err = await cli("watch", "cluster", "c", "d", "--server", cp.address,
                                 "--timeout", "0.5")  # fmt: skip
    assert status == 0, err
    assert sorted(line.split()[2] for line in out.splitlines() if line.startswith("changed")) == [
        "c:",
        "d:",
    ]
    assert err == ""


async def test_a_resource_no_source_serves_exits_5(cp: ControlPlane, tmp_path: Path) -> None:
    """Watching a type that none of the given sources serves prints why and exits 5, not 0."""
    path = tmp_path / "cds.yaml"
    cp.write_file(path, CLUSTER.type_url)
    status, out, err = await cli("watch", "listener", "l", "--file", str(path), "--count", "1")
    assert status == 5
    assert out.startswith('error    Listener l: Listener "l": no xDS server is configured')
    assert one_error_line(err) == "xdsclient: not usable: Listener l (not served)"
