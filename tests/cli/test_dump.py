"""``xdsclient dump`` dumps everything asked for: each resource and the listener's whole
configuration, held together until the dump is read."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import json_format

from tests.cli.helpers import cli, one_error_line
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


def names(out: str) -> set[str]:
    from envoy.service.status.v3 import csds_pb2

    dump = json_format.Parse(out, csds_pb2.ClientConfig())
    return {item.name for item in dump.generic_xds_configs}


async def test_every_resource_asked_for_is_dumped(cp: ControlPlane) -> None:
    """``--resource A --resource B`` dumps both A and B, not only the last one waited for."""
    status, out, _ = await cli("dump", "--resource", "cluster:c", "--resource", "cluster:d",
                               "--server", cp.address, "--json")  # fmt: skip
    assert status == 0
    assert names(out) == {"c", "d"}


async def test_a_listener_and_a_resource_are_dumped_together(cp: ControlPlane) -> None:
    """``--listener L --resource R`` dumps L's whole configuration and R."""
    status, out, _ = await cli("dump", "--listener", "l", "--resource", "cluster:d",
                               "--server", cp.address, "--json")  # fmt: skip
    assert status == 0
    assert names(out) == {"l", "routes", "c", "d"}


async def test_a_nacked_resource_ends_the_wait_and_the_dump_exits_5(cp: ControlPlane) -> None:
    """A NACKed resource is an answer: the dump does not wait out --timeout, and exits 5
    naming it and why, in the one line on stderr (not the library's NACK WARNING as well)."""
    status, out, err = await cli("dump", "--resource", "cluster:bad", "--resource", "cluster:c",
                                 "--server", cp.address, "--timeout", "20")  # fmt: skip
    assert status == 5
    assert "NACKED" in out
    assert one_error_line(err) == (
        "xdsclient: not usable: Cluster bad (NACKED: invalid resource: "
        "eds_cluster_config.eds_config: must be ads or self)"
    )
    assert len(err.splitlines()) == 1


async def test_a_resource_no_source_serves_is_named_and_exits_5(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A resource asked for that is not in the dump at all (no source serves its type) is a
    failure, named on stderr, not an empty dump with status 0."""
    path = tmp_path / "cds.yaml"
    cp.write_file(path, CLUSTER.type_url)
    status, out, err = await cli("dump", "--resource", "cluster:c", "--resource", "listener:l",
                                 "--file", str(path))  # fmt: skip
    assert status == 5
    assert "ACKED" in out
    assert one_error_line(err) == "xdsclient: not usable: Listener l (not served)"


async def test_a_dump_over_rest_exits_with_nothing_on_stderr(cp: ControlPlane) -> None:
    """Over REST-JSON, the client's close at exit leaves stderr empty: the endpoint poll's
    task used to end with its "closed" error unretrieved, and Python printed that traceback."""
    endpoint = await cp.serve_rest()
    status, out, err = await cli("dump", "--rest", endpoint.url, "--resource", "cluster:c",
                                 "--resource", "endpoint:c", "--json")  # fmt: skip
    assert status == 0
    assert names(out) == {"c"}
    assert err == ""
