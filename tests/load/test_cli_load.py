"""``xdsclient load``: the command line the tests use, its JSON, and one-line errors with
distinct exit statuses."""

from __future__ import annotations

import json

from tests.cli.helpers import cli, closed_port, one_error_line
from tests.conformance import servers
from xdsclient.testing.builders import api_listener


async def test_the_command_line_runs_and_writes_json(cp, tmp_path):
    """The documented command prints the table and writes every number to ``--json FILE``;
    a ``--push`` command that fails is counted, not fatal."""
    out_file = tmp_path / "run.json"
    status, out, _ = await cli("load", "--server", cp.address, "--listener", "l", "--clients",
                               "5", "--duration", "1", "--json", str(out_file),
                               "--push", "exit 3", "--push-at", "0.5")  # fmt: skip
    assert status == 0
    assert "clients 5  connected 5  complete 5" in out
    assert "first complete config" in out
    data = json.loads(out_file.read_text())
    assert data["complete"] == 5
    assert data["histograms"]["first_config"]["count"] == 5
    assert data["scenario"]["listener"] == "l"
    assert (data["pushes"], data["errors"]) == (1, {"PUSH_FAILED": 1})
    assert len({r.message.node.id for r in cp.requests if r.message.HasField("node")}) == 5


async def test_a_yaml_scenario_with_flags_over_it(cp, tmp_path):
    """``--scenario FILE`` runs the file; a flag beside it replaces that field."""
    path = tmp_path / "s.yaml"
    path.write_text(f"server: {cp.address}\nlistener: l\nclients: 9\nduration: 0.8\n"
                    "faults: [{nack_names: [c1]}]\n")  # fmt: skip
    status, out, _ = await cli("load", "--scenario", str(path), "--clients", "2")
    assert status == 0
    assert "clients 2  connected 2  complete 0" in out
    assert len(cp.nacks()) == 2


async def test_an_unknown_yaml_field_is_a_usage_error(tmp_path):
    """An unknown field in the scenario file: one line naming it, status 2."""
    path = tmp_path / "s.yaml"
    path.write_text("server: 127.0.0.1:1\nlistener: l\nclinets: 3\n")
    status, _, err = await cli("load", "--scenario", str(path))
    assert status == 2
    assert one_error_line(err) == "xdsclient: scenario: unknown field 'clinets'"


async def test_a_negative_count_is_a_usage_error(tmp_path):
    """``clients: -3`` in a file: status 2, one line."""
    path = tmp_path / "s.yaml"
    path.write_text("server: 127.0.0.1:1\nlistener: l\nclients: -3\n")
    status, _, err = await cli("load", "--scenario", str(path))
    assert status == 2
    assert "clients: -3 must be a whole number above 0" in one_error_line(err)


async def test_an_unreachable_server_is_status_4():
    """Nothing listening: one line, status 4, before any client starts."""
    status, _, err = await cli("load", "--server", f"127.0.0.1:{closed_port()}", "--listener",
                               "l", "--duration", "1")  # fmt: skip
    assert status == 4
    assert "cannot reach 127.0.0.1:" in one_error_line(err)


async def test_a_server_without_xds_is_status_6_in_one_line():
    """A gRPC server that serves no xDS: not served, one line, status 6, long before the run's
    duration."""
    async with servers.grpc_server(servers.greeter()) as address:
        status, out, err = await cli("load", "--server", address, "--listener", "l",
                                     "--clients", "3", "--duration", "60", "--quiet")  # fmt: skip
    assert (status, out) == (6, "")
    assert "does not serve" in one_error_line(err)
    assert len(err.splitlines()) == 1


async def test_a_missing_scenario_file_is_status_3(tmp_path):
    """A scenario file that cannot be read: status 3 (configuration)."""
    status, _, err = await cli("load", "--scenario", str(tmp_path / "none.yaml"))
    assert status == 3
    assert "none.yaml: No such file or directory" in one_error_line(err)


async def test_push_timing_without_a_push_is_a_usage_error():
    """``--push-at`` without ``--push``: status 2."""
    status, _, err = await cli("load", "--server", "127.0.0.1:1", "--listener", "l",
                               "--push-at", "1")  # fmt: skip
    assert status == 2
    assert "no --push COMMAND" in one_error_line(err)


async def test_a_listener_that_never_loads_is_status_4_naming_it(cp):
    """``--listener nosuch``: the table still prints, then one line naming the resource that
    was missing, status 4 (it was status 0 with a table of zeros)."""
    status, out, err = await cli("load", "--server", cp.address, "--listener", "nosuch",
                                 "--clients", "3", "--duration", "1", "--quiet")  # fmt: skip
    assert status == 4
    assert "clients 3  connected 3  complete 0" in out
    assert one_error_line(err) == (
        "xdsclient: no client had a complete configuration within 1 s; "
        "missing: Listener nosuch (never sent)"
    )


async def test_a_missing_resource_down_the_walk_is_named(cp):
    """A listener whose route configuration does not exist: status 4 names the route."""
    cp.set(api_listener("l2", route_config_name="gone"))
    status, _, err = await cli("load", "--server", cp.address, "--listener", "l2",
                               "--clients", "2", "--duration", "1", "--quiet")  # fmt: skip
    assert status == 4
    assert one_error_line(err).endswith("; missing: RouteConfiguration gone (never sent)")


async def test_a_missing_resource_of_a_list_is_named(cp):
    """``--resource`` entries: the one the server does not have is named, not the others."""
    status, _, err = await cli("load", "--server", cp.address, "--resource", "cluster:c0",
                               "--resource", "endpoint:nosuch", "--clients", "2",
                               "--duration", "1", "--quiet")  # fmt: skip
    assert status == 4
    assert one_error_line(err).endswith("; missing: ClusterLoadAssignment nosuch (never sent)")


async def test_a_json_file_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    """``--json`` into a folder that does not exist: one line naming the file, the config exit
    status, at once (the run's clients never connect: the server sees no stream)."""
    async with servers.grpc_server() as address:
        bad = tmp_path / "nowhere" / "run.json"
        status, out, err = await cli("load", "--server", address, "--listener", "l",
                                     "--duration", "30", "--json", str(bad))  # fmt: skip
    assert status == 3
    assert one_error_line(err) == f"xdsclient: --json {bad}: No such file or directory"
    assert out == ""
