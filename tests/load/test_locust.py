"""Distributed runs on Locust: ``--processes K`` and ``--master``/``--worker`` on loopback.

Each run here starts real Locust processes (a master and its workers, gevent-patched as
`xdsclient.load._locust_main` says), never in the test process itself: importing Locust would
patch this one. A process takes a few seconds to import Locust and the client, so each test is
bounded by its own timeout rather than by the suite's default.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

import pytest

from tests.children import stop_child
from tests.cli.helpers import ENV, cli, closed_port, one_error_line
from tests.conformance import servers
from tests.helpers import eventually
from xdsclient.load import Histogram, Progress
from xdsclient.load._locust_merge import (
    merge_progress,
    progress_from_dict,
    progress_to_dict,
    shares,
)

from .conftest import CLUSTERS, assignments

EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"

pytestmark = pytest.mark.timeout(180)


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "xdsclient", "load", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV,
    )  # fmt: skip


async def finish(process: asyncio.subprocess.Process, seconds: float = 120) -> tuple[int, str, str]:
    """Its exit status, stdout and stderr (never a traceback)."""
    try:
        out, err = await asyncio.wait_for(process.communicate(), seconds)
    finally:
        await stop_child(process, grace=0)
    assert process.returncode is not None
    assert "Traceback" not in err.decode(), err.decode()
    return process.returncode, out.decode(), err.decode()


def check_aggregated(data: dict[str, Any], cp, clients: int, workers: int) -> None:
    """One report of every worker's clients: each node id once, the same ones the control
    plane saw, and every histogram with every client."""
    assert data["processes"] == workers
    assert (data["clients"], data["connected"], data["complete"]) == (clients, clients, clients)
    assert data["histograms"]["first_config"]["count"] == clients
    assert data["histograms"]["connect"]["count"] == clients
    expected = {f"xdsclient-load-{i}" for i in range(clients)}
    nodes = [client["node_id"] for client in data["per_client"]]
    assert sorted(nodes) == sorted(expected)
    seen = {r.message.node.id for r in cp.requests if r.message.HasField("node")}
    assert seen == expected
    assert data["scenario"]["clients"] == clients
    assert data["scenario"]["first_index"] == 0


async def test_two_local_workers_each_run_a_share_and_one_report_adds_them_up(cp, tmp_path):
    """``--processes 2``: a local master and two worker processes split 20 clients, and the
    table and ``--json`` hold all 20, with the histograms merged exactly."""
    out_file = tmp_path / "run.json"
    process = await start("--server", cp.address, "--listener", "l", "--clients", "20",
                          "--duration", "1.5", "--processes", "2",
                          "--json", str(out_file))  # fmt: skip
    status, out, err = await finish(process)
    assert status == 0, err
    assert "clients 20  connected 20  complete 20" in out
    assert "(2 processes)" in out
    assert "load done" in err  # progress came from the workers, through the master
    check_aggregated(json.loads(out_file.read_text()), cp, clients=20, workers=2)


async def test_a_master_and_two_workers_started_apart_aggregate_both(cp, tmp_path):
    """``--master --expect-workers 2`` and two ``--worker --master-host`` processes, as on
    three machines: the master's report has both workers' clients; the workers print none."""
    port = closed_port()
    out_file = tmp_path / "run.json"
    master = await start("--server", cp.address, "--listener", "l", "--clients", "9",
                         "--duration", "1.5", "--master", "--expect-workers", "2",
                         "--master-bind-host", "127.0.0.1", "--master-port", str(port),
                         "--quiet", "--json", str(out_file))  # fmt: skip
    workers = [await start("--worker", "--master-host", "127.0.0.1", "--master-port", str(port))
               for _ in range(2)]  # fmt: skip
    status, out, err = await finish(master)
    assert status == 0, err
    assert "clients 9  connected 9  complete 9" in out
    for worker in workers:
        worker_status, worker_out, worker_err = await finish(worker, 30)
        assert worker_status == 0, worker_err
        assert worker_out == ""
        assert worker_err.startswith(f"xdsclient load: worker of 127.0.0.1:{port}")
    check_aggregated(json.loads(out_file.read_text()), cp, clients=9, workers=2)


async def test_a_push_runs_once_and_every_worker_measures_it(cp, tmp_path):
    """``--push`` over two workers: the command runs once (on the first worker), the result
    counts one push, and the clients of both workers measure push to applied from it."""
    marks = tmp_path / "pushes"
    out_file = tmp_path / "run.json"
    process = await start("--server", cp.address, "--listener", "l", "--clients", "8",
                          "--duration", "6", "--processes", "2", "--quiet",
                          "--push", f"echo pushed >> {marks}", "--push-at", "1",
                          "--json", str(out_file))  # fmt: skip

    def every_client_has_its_first_config() -> bool:
        full = (r for r in cp.acks(EDS) if len(r.message.resource_names) >= CLUSTERS)
        return len({r.stream for r in full}) >= 8

    async def push_when_told() -> None:  # the command tells us; we push on the control plane
        await eventually(marks.exists, 30, what=f"the push command to write {marks}")
        # A client still loading (a busy machine starts a worker late) would take the pushed
        # assignments as its first config, which is not a push it applied: wait for all 8.
        await eventually(every_client_has_its_first_config, 30, what="8 clients' first ACKs")
        cp.set_all(assignments(9))

    pusher = asyncio.create_task(push_when_told())
    try:
        status, _, err = await finish(process)
    finally:
        pusher.cancel()
    assert status == 0, err
    assert marks.read_text() == "pushed\n"
    data = json.loads(out_file.read_text())
    assert data["pushes"] == 1
    assert data["errors"] == {}
    # every client applies the update of each of the CLUSTERS assignments after the push
    assert data["histograms"]["push_to_applied"]["count"] == 8 * CLUSTERS


async def test_2000_clients_over_two_processes_report_every_client_and_the_push(cp, tmp_path):
    """``--processes 2`` at the size distributed runs are for: 2,000 clients and a push during
    the run. The merged result (megabytes of clients and histogram buckets, far past asyncio's
    64 KiB line limit that made this exit 70) reaches the table and ``--json`` whole, and the
    merged progress shows push to applied."""
    clients = 2000
    marks = tmp_path / "pushes"
    out_file = tmp_path / "run.json"
    process = await start("--server", cp.address, "--listener", "l", "--clients", str(clients),
                          "--duration", "25", "--processes", "2",
                          "--push", f"echo pushed >> {marks}", "--push-at", "1",
                          "--json", str(out_file))  # fmt: skip

    async def push_once_all_are_complete() -> None:
        # The push starts at 1 s (its command tells us); the update goes out once every client
        # holds every assignment, so each one applies it as an update (measured from 1 s).
        await eventually(marks.exists, 30, what=f"the push command to write {marks}")
        complete: set[int] = set()
        seen = 0

        def all_complete() -> bool:
            nonlocal seen
            requests = cp.requests[seen:]
            seen += len(requests)
            complete.update(r.stream for r in requests if r.type_url == EDS
                            and r.message.response_nonce
                            and len(r.message.resource_names) == CLUSTERS)  # fmt: skip
            return len(complete) >= clients

        await eventually(all_complete, 30, what=f"all {clients} clients to ACK every assignment")
        cp.set_all(assignments(9))

    pusher = asyncio.create_task(push_once_all_are_complete())
    try:
        status, out, err = await finish(process)
    finally:
        pusher.cancel()
    assert status == 0, err
    assert f"clients {clients}  connected {clients}  complete {clients}" in out
    assert "(2 processes)" in out
    data = json.loads(out_file.read_text())
    assert len(json.dumps(data, separators=(",", ":"))) > 4 * 64 * 1024  # what crossed the pipe
    check_aggregated(data, cp, clients=clients, workers=2)
    assert (data["pushes"], data["errors"]) == (1, {})
    applied = data["histograms"]["push_to_applied"]["count"]
    assert applied == clients * CLUSTERS  # every client applied each updated assignment
    assert f"{'push to applied':<24}{applied:>8}" in out  # and the table's row has them all
    done = [line for line in err.splitlines() if line.startswith("load done")]
    assert len(done) == 1
    assert f"{clients}/{clients} started, {clients} connected, {clients} complete" in done[0]
    assert "push to applied -" not in done[0]
    assert "push to applied" in done[0]


async def test_workers_that_never_come_are_status_4():
    """A master whose workers do not connect within ``--locust-timeout``: one line, status 4."""
    for _ in range(3):  # another test may take the free port before the master binds it
        port = closed_port()
        process = await start("--server", "127.0.0.1:1", "--listener", "l", "--master",
                              "--expect-workers", "1", "--master-bind-host", "127.0.0.1",
                              "--master-port", str(port), "--locust-timeout", "1")  # fmt: skip
        status, _, err = await finish(process)
        if not (status == 3 and "the port is taken" in err):
            break
    assert status == 4
    assert one_error_line(err) == "xdsclient: 0 of 1 Locust workers connected within 1 s"


async def test_a_taken_master_port_is_status_3():
    """``--master-port`` that something else listens on: one line, status 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = await start("--server", "127.0.0.1:1", "--listener", "l", "--master",
                              "--expect-workers", "1", "--master-bind-host", "127.0.0.1",
                              "--master-port", str(port))  # fmt: skip
        status, _, err = await finish(process)
    assert status == 3
    assert one_error_line(err) == (
        f"xdsclient: --master-port: cannot listen on 127.0.0.1:{port}: the port is taken"
    )


async def test_a_worker_without_a_master_is_status_4():
    """A worker with nobody at ``--master-host``: one line, status 4, within its timeout."""
    port = closed_port()
    process = await start("--worker", "--master-port", str(port), "--locust-timeout", "1")
    status, _, err = await finish(process)
    assert status == 4
    assert one_error_line(err) == f"xdsclient: no Locust master at 127.0.0.1:{port} within 1 s"


async def test_a_worker_that_cannot_reach_the_server_fails_the_run_with_status_4(tmp_path):
    """The server is unreachable from the workers: the master reports the worker's own error
    as one line, status 4, as a local run would."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"server: 127.0.0.1:{closed_port()}\nlistener: l\nduration: 1\n"
                        "connect_timeout: 0.5\n")  # fmt: skip
    process = await start("--scenario", str(scenario), "--processes", "1", "--quiet")
    status, _, err = await finish(process)
    assert status == 4
    assert "a Locust worker failed: cannot reach 127.0.0.1:" in one_error_line(err)


async def test_a_server_without_xds_fails_a_distributed_run_with_status_6():
    """The workers find the server does not serve xDS: the master reports it as one line,
    status 6, as a local run would (it was 70, an internal error)."""
    async with servers.grpc_server(servers.greeter()) as address:
        process = await start("--server", address, "--listener", "l", "--clients", "4",
                              "--duration", "30", "--processes", "1", "--quiet")  # fmt: skip
        status, _, err = await finish(process)
    assert status == 6
    assert "a Locust worker failed: " in one_error_line(err)
    assert "does not serve" in one_error_line(err)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--expect-workers", "2"), "--expect-workers goes with --master"),
        (("--master",), "--master needs --expect-workers K"),
        (("--master-host", "h"), "--master-host goes with --worker"),
        (("--processes", "2", "--master"), "not allowed with argument"),
    ],
)
async def test_options_that_do_not_go_together_are_usage_errors(args, message):
    """A distribution option without its mode, or two modes: one line, status 2."""
    status, _, err = await cli("load", "--server", "127.0.0.1:1", "--listener", "l", *args)
    assert status == 2
    assert message in one_error_line(err)


async def test_a_worker_given_a_scenario_is_a_usage_error():
    """A worker takes its scenario from its master: ``--server`` beside ``--worker`` is
    refused, status 2."""
    status, _, err = await cli("load", "--worker", "--server", "127.0.0.1:1")
    assert status == 2
    assert one_error_line(err) == (
        "xdsclient: --server: a --worker takes its scenario and reports from its master"
    )


def test_clients_are_split_evenly_in_consecutive_ranges():
    """Each worker gets a consecutive range of client numbers, sizes differing by one at most."""
    assert shares(20, 2) == [(0, 10), (10, 10)]
    assert shares(10, 3) == [(0, 4), (4, 3), (7, 3)]
    assert shares(1, 3) == [(0, 1), (1, 0), (1, 0)]


def test_progress_of_workers_adds_up_and_crosses_a_message_intact():
    """Counts add, the elapsed time is the longest, histograms merge exactly, and a snapshot
    survives `progress_to_dict` and JSON unchanged, histograms included."""
    first, second = Histogram(), Histogram()
    for value in (0.001, 0.002):
        first.record(value)
    second.record(0.0004)
    a = Progress(elapsed=1.0, started=5, connected=4, complete=3, reconnects=1, nacks=0,
                 errors=2, latest_connect=0.01, histograms={"connect": first})  # fmt: skip
    b = Progress(elapsed=1.2, started=5, connected=5, complete=5, reconnects=0, nacks=1,
                 errors=0, latest_ack_latency=0.003, latest_push_to_applied=0.02,
                 histograms={"connect": second})  # fmt: skip
    merged = merge_progress([a, b], done=False)
    assert (merged.started, merged.connected, merged.complete) == (10, 9, 8)
    assert (merged.reconnects, merged.nacks, merged.errors) == (1, 1, 2)
    assert merged.elapsed == 1.2
    assert (merged.latest_connect, merged.latest_ack_latency) == (0.01, 0.003)
    assert merged.latest_push_to_applied == 0.02  # a worker's push to applied shows
    assert merged.histograms is not None
    assert merged.histograms["connect"].count == 3
    assert merged.histograms["connect"].min == 0.0004
    again = progress_from_dict(json.loads(json.dumps(progress_to_dict(merged))))
    assert again == merged
    assert again.histograms is not None
    assert again.histograms["connect"] == merged.histograms["connect"]
