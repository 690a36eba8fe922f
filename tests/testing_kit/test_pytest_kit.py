"""The plugin's kit for testing a server: the server under test launched from a command, a
client factory, variant parametrization, and no embedded control plane when a server is named;
each run in a pytest subprocess as a user would run it."""

from __future__ import annotations

import errno
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from tests.testing_kit.runner import INI, SERVE, run_pytest
from xdsclient.testing import ControlPlane

DEMO_TESTS = """
import pytest

async def test_one(xds_client, xds_server):
    config = await xds_client.wait_for_config("demo.example.com", timeout=10)
    print("server", xds_server.pid, xds_server.address, "clusters", len(config.clusters))

async def test_two(xds_client, xds_server):
    await xds_client.wait_for_config("demo.example.com", timeout=10)
    print("server", xds_server.pid, xds_server.address)
"""


def user_files(directory: Path, test: str, conftest: str = "") -> Path:
    (directory / "pytest.ini").write_text(INI)
    (directory / "test_user.py").write_text(test)
    if conftest:
        (directory / "conftest.py").write_text(conftest)
    return directory


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError as exc:
        return exc.errno == errno.ECONNREFUSED
    return False


async def test_the_server_command_runs_once_for_the_session_and_is_stopped_at_the_end(
    tmp_path: Path,
) -> None:
    """``--xds-server-command`` with ``{port}``: one server for every test, gone afterwards."""
    code, out = await run_pytest(
        user_files(tmp_path, DEMO_TESTS), "--xds-server-command", SERVE, "-W", "error"
    )
    assert code == 0, out
    assert "2 passed" in out
    servers = set(re.findall(r"server (\d+) (\S+)", out))
    assert len(servers) == 1, out  # one process, one address, for both tests
    ((pid, address),) = servers
    assert "clusters 4" in out
    assert gone(int(pid)), "the server under test outlived the session"
    assert refused(address)
    assert "warning" not in out.lower()  # the documented set-up runs quietly


async def test_the_server_command_can_listen_on_the_port_given_by_xds_server(
    tmp_path: Path,
) -> None:
    """Without ``{port}``, the command's port is the one ``--xds-server`` names."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    command = f"{sys.executable} -m xdsclient serve --port {port}"
    code, out = await run_pytest(
        user_files(tmp_path, DEMO_TESTS), "--xds-server-command", command,
        "--xds-server", f"127.0.0.1:{port}",
    )  # fmt: skip
    assert code == 0, out
    assert f"127.0.0.1:{port}" in out


async def test_a_failing_test_reports_what_the_server_printed(tmp_path: Path) -> None:
    """The server's output is a section of a failing test's report (and only of a failing one)."""
    failing = DEMO_TESTS + "\ndef test_three(xds_server):\n    assert False, 'on purpose'\n"
    code, out = await run_pytest(user_files(tmp_path, failing), "--xds-server-command", SERVE)
    assert code == 1, out
    assert "2 passed, 1 failed" in out or "1 failed, 2 passed" in out, out
    assert out.count("xds server output") == 1, out
    assert "serving the demo configuration" in out


async def test_a_server_command_that_exits_errors_every_test_with_its_output(
    tmp_path: Path,
) -> None:
    """A command that dies before listening is reported once per test, with its status and
    output, without waiting for the start timeout."""
    command = f"{sys.executable} -c \"print('cannot bind {{port}}'); raise SystemExit(7)\""
    code, out = await run_pytest(
        user_files(tmp_path, DEMO_TESTS), "--xds-server-command", command,
        "--xds-server-start-timeout", "30",
    )  # fmt: skip
    assert code == 1, out
    assert "2 errors" in out, out
    assert "the server command exited with status 7" in out
    assert re.search(r"cannot bind \d+", out), out
    assert "Traceback" not in out


async def test_a_server_that_never_listens_times_out(tmp_path: Path) -> None:
    """A command that runs without listening fails after ``--xds-server-start-timeout`` and is
    stopped."""
    command = f"{sys.executable} -c \"import time; print('{{port}}', flush=True); time.sleep(60)\""
    code, out = await run_pytest(
        user_files(tmp_path, DEMO_TESTS), "--xds-server-command", command,
        "--xds-server-start-timeout", "0.5",
    )  # fmt: skip
    assert code == 1, out
    assert re.search(r"did not listen on 127\.0\.0\.1:\d+ within 0\.5s", out), out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--xds-server-command", "serve"], "needs {port} in the command or --xds-server"),
        (["--xds-server-command", "x {port}", "--xds-bootstrap", "b.json"], "not --xds-bootstrap"),
        (["--xds-server-command", "x {port}", "--xds-server-start-timeout", "0"], "positive"),
        (["--xds-server", "nowhere", "--xds-server-command", "x"], "must be HOST:PORT"),
    ],
)
async def test_bad_server_command_settings_are_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Settings that cannot start a server stop the run as a usage error, saying why."""
    code, out = await run_pytest(user_files(tmp_path, DEMO_TESTS), *args)
    assert code == 4, out
    assert message in out


async def test_no_embedded_control_plane_starts_for_a_named_server(tmp_path: Path) -> None:
    """``xds_client`` and ``xds_check`` start the embedded control plane only when it is the
    server under test."""
    test = "async def test_client(xds_client, xds_check):\n    pass\n"
    async with ControlPlane() as cp:
        code, out = await run_pytest(
            user_files(tmp_path, test), "--setup-show", "--xds-server", cp.address
        )
    assert code == 0, out
    assert "xds_control_plane" not in out
    code, out = await run_pytest(tmp_path, "--setup-show")
    assert code == 0, out
    assert "SETUP    F xds_control_plane" in out


FACTORY_TESTS = """
from xdsclient import ClientClosedError
from xdsclient.resources import CLUSTER
from xdsclient.testing import builders

MADE = []

async def test_clients_with_their_own_nodes(xds_client_factory, xds_control_plane):
    xds_control_plane.set(builders.cluster("c"))
    for i in range(3):
        client = await xds_client_factory(node_id=f"node-{i}", metadata={"shard": i})
        await client.wait_for(CLUSTER, "c", timeout=10)
        MADE.append(client)
    nodes = {
        (r.message.node.id, r.message.node.metadata["shard"])
        for r in xds_control_plane.requests
        if r.message.HasField("node")
    }
    assert nodes == {("node-0", 0), ("node-1", 1), ("node-2", 2)}
    assert xds_client_factory.clients == MADE

async def test_every_client_was_closed_at_teardown():
    assert len(MADE) == 3
    for client in MADE:
        try:
            client.watch(CLUSTER, "c")
        except ClientClosedError:
            continue
        raise AssertionError("a client outlived its test")
"""


async def test_the_client_factory_makes_clients_per_node_and_closes_them(tmp_path: Path) -> None:
    """``xds_client_factory`` makes started clients with their own node id and metadata, and
    closes every one at teardown."""
    code, out = await run_pytest(user_files(tmp_path, FACTORY_TESTS), "-p", "no:randomly")
    assert code == 0, out
    assert "2 passed" in out


VARIANT_TESTS = """
import pytest

@pytest.mark.xds_variants()
async def test_all(xds_client, xds_variant):
    print("all", xds_variant, xds_client.options.ads, xds_client.options.delta)

@pytest.mark.xds_variants("xds-delta")
async def test_some(xds_client_factory, xds_variant):
    client = await xds_client_factory()
    print("some", xds_variant, client.options.ads, client.options.delta)

async def test_default(xds_client, xds_variant):
    print("default", xds_variant)
"""


async def test_the_variant_marker_runs_a_test_once_per_variant(tmp_path: Path) -> None:
    """``@pytest.mark.xds_variants`` parametrizes the test's clients over the variants named
    (all four without names); unmarked tests keep ``--xds-variant``."""
    code, out = await run_pytest(
        user_files(tmp_path, VARIANT_TESTS), "--xds-variant", "ads-delta", "-W", "error"
    )
    assert code == 0, out
    assert "6 passed" in out
    assert sorted(re.findall(r"all \S+ \S+ \S+", out)) == [
        "all ads-delta True True",
        "all ads-sotw True False",
        "all xds-delta False True",
        "all xds-sotw False False",
    ]
    assert "some xds-delta False True" in out
    assert "default ads-delta" in out


async def test_an_unknown_variant_in_the_marker_fails_collection_naming_it(
    tmp_path: Path,
) -> None:
    """A typo in the marker is a collection error naming the variant, not a skipped test."""
    test = "import pytest\n\n@pytest.mark.xds_variants('ads-sotv')\ndef test_x(xds_variant): pass\n"
    code, out = await run_pytest(user_files(tmp_path, test))
    assert code == 2, out
    assert "unknown xDS variant(s) ads-sotv" in out


async def test_a_conftest_can_override_the_settings(cp: ControlPlane, tmp_path: Path) -> None:
    """Overriding the ``xds_settings`` fixture sets the server and variant in code."""
    conftest = (
        "import pytest\nfrom xdsclient.testing.pytest_plugin import XdsTestSettings\n\n"
        "@pytest.fixture\ndef xds_settings():\n"
        f"    return XdsTestSettings(server={cp.address!r}, variant='xds-delta', node_id='me')\n"
    )
    test = (
        "from xdsclient.resources import CLUSTER\n\n"
        "async def test_it(xds_client):\n"
        "    await xds_client.wait_for(CLUSTER, 'c', timeout=10)\n"
        "    print('delta', xds_client.options.delta, 'ads', xds_client.options.ads)\n"
    )
    code, out = await run_pytest(user_files(tmp_path, test, conftest), "--setup-show")
    assert code == 0, out
    assert "delta True ads False" in out
    assert "xds_control_plane" not in out
    assert {r.message.node.id for r in cp.requests if r.message.HasField("node")} == {"me"}


def doc_block(language: str, after: str) -> str:
    """The first ``language`` code block of docs/testing-control-planes.md after ``after``."""
    text = (Path(__file__).parents[2] / "docs" / "testing-control-planes.md").read_text()
    section = text[text.index(after) :]
    start = section.index(f"```{language}\n") + len(language) + 4
    return section[start : section.index("```", start)]


async def test_the_documented_set_up_and_example_pass_without_a_warning(tmp_path: Path) -> None:
    """The docs' pytest configuration and complete example run as they are, warnings as
    errors: the loop scope is set, the variant marker and fixtures are the documented ones."""
    (tmp_path / "pytest.ini").write_text(doc_block("ini", "## Set-up"))
    (tmp_path / "test_doc.py").write_text(doc_block("python", "## A complete test"))
    code, out = await run_pytest(tmp_path, "-W", "error", "-p", "no:randomly")
    assert code == 0, out
    assert "5 passed" in out
    assert "warning" not in out.lower()
