"""The checker against servers built to misbehave (`tests.conformance.servers`): each failure is
one line on stderr with its own exit status, never a traceback, and is reported against the rule
it breaks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.config.core.v3.base_pb2 import Node

from tests.conformance import servers
from tests.test_cli import cli
from xdsclient import TransportError
from xdsclient._cli._check import EPILOG
from xdsclient.conformance import VARIANTS, RuleId, check
from xdsclient.conformance._probe import Probe, StreamEnded
from xdsclient.resources import ENDPOINT, LISTENER
from xdsclient.testing import ControlPlane, SeededBug, builders, demo_resources

FAST: dict[str, Any] = {"quiet": 0.2, "timeout": 1.0}
CLI_FAST = ("--quiet-window", "0.2", "--timeout", "1.0")


def one_line(err: str) -> str:
    """The single stderr line of a failed run (asserting there is no traceback)."""
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


async def test_an_unreachable_server_is_one_line_and_exit_4() -> None:
    """A closed port exits 4 (not 1) with one line naming the server, and prints no report."""
    address = servers.closed_port()
    code, out, err = await cli("check", "--server", address, "--timeout", "0.5")
    assert (code, out) == (4, "")
    assert one_line(err) == f"xdsclient: cannot connect to {address} within 0.5 s " + (
        "(channel transient failure)"
    )


async def test_check_raises_transport_error_for_an_unreachable_server() -> None:
    """The library raises `TransportError` when no connection is made in time."""
    with pytest.raises(TransportError, match="cannot connect"):
        await check(servers.closed_port(), timeout=0.5)


async def test_a_grpc_server_without_xds_is_nothing_served_exit_6() -> None:
    """A gRPC server with no xDS service is not a pass: not ok, exit 6, one line."""
    async with servers.grpc_server(servers.greeter()) as address:
        report = await check(address, **FAST)
        code, out, err = await cli("check", "--server", address, "--json", *CLI_FAST)
    assert not report.ok
    assert report.not_served == "no xDS service: no variant is served"
    assert report.table().splitlines() == [  # no table of rules without a column
        *(f"skipped {variant}: {report.skipped[variant]}" for variant in report.skipped),
        "NOT SERVED: no xDS service: no variant is served",
    ]
    assert set(report.skipped) == set(VARIANTS)
    assert all("UNIMPLEMENTED" in why for why in report.skipped.values())
    assert code == 6
    assert json.loads(out)["ok"] is False
    assert one_line(err) == (
        f"xdsclient: nothing to check at {address}: no xDS service: no variant is served"
    )


@pytest.mark.parametrize("read_first", [False, True], ids=["at-open", "on-first-request"])
async def test_a_server_aborting_every_stream_fails_initial_request_answered(
    read_first: bool,
) -> None:
    """Streams that abort (before or after our first write) fail initial-request-answered in
    every variant with the server's status, and nothing escapes: exit 1, one line."""
    async with servers.grpc_server(*servers.aborting(read_first=read_first)) as address:
        reports = [await check(address, **FAST) for _ in range(3)]
        code, _, err = await cli("check", "--server", address, *CLI_FAST)
    for report in reports:
        assert report.skipped == {}
        failed = {(f.rule.id, f.variant) for f in report.failures}
        assert failed == {(RuleId.INITIAL_REQUEST_ANSWERED, v) for v in VARIANTS}
        assert all("stream ended: INTERNAL" in f.detail for f in report.failures)
    assert code == 1
    assert one_line(err) == "xdsclient: a MUST rule failed"


async def test_an_ads_only_server_is_checked_over_ads_and_skips_per_type() -> None:
    """Per-type services UNIMPLEMENTED: the xds-* variants are skipped every time (never a
    stray exception), the ads-* ones pass."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        async with servers.grpc_server(*servers.ads_only(control_plane)) as address:
            reports = [await check(address, **FAST) for _ in range(3)]
    for report in reports:
        assert report.failures == [], report.table()
        assert report.ok
        assert set(report.discovered) == {"ads-sotw", "ads-delta"}
        assert set(report.skipped) == {"xds-sotw", "xds-delta"}
        assert all(why.startswith("UNIMPLEMENTED") for why in report.skipped.values())


async def test_a_rude_lrs_service_fails_the_lrs_rules_only() -> None:
    """An LRS service answering with a zero interval and ending the stream at the first report
    fails lrs-interval-set and lrs-accepts-reports, and nothing else."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        handlers = (*servers.ads_only(control_plane), servers.rude_lrs())
        async with servers.grpc_server(*handlers) as address:
            report = await check(address, variants=["ads-sotw", "ads-delta"], **FAST)
    failed = {(f.rule.id, f.variant) for f in report.failures}
    assert failed == {
        (rule, variant)
        for rule in (RuleId.LRS_INTERVAL_SET, RuleId.LRS_ACCEPTS_REPORTS)
        for variant in ("ads-sotw", "ads-delta")
    }
    assert all(
        "INTERNAL" in f.detail for f in report.failures if f.rule.id == "lrs-accepts-reports"
    )


async def test_an_lrs_service_that_never_answers_fails_both_lrs_rules() -> None:
    """An LRS service silent after the node fails both LRS rules, saying it was not answered."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        handlers = (*servers.ads_only(control_plane), servers.silent_lrs())
        async with servers.grpc_server(*handlers) as address:
            report = await check(address, variants=["ads-sotw"], **FAST)
    assert {f.rule.id for f in report.failures} == {
        RuleId.LRS_INTERVAL_SET,
        RuleId.LRS_ACCEPTS_REPORTS,
    }
    assert all("no response within 1 s" in f.detail for f in report.failures)


async def test_a_server_without_lrs_has_the_lrs_rules_not_applicable() -> None:
    """A server whose LRS service is UNIMPLEMENTED: the LRS rules are N/A, not failures."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        async with servers.grpc_server(*servers.ads_only(control_plane)) as address:
            report = await check(address, variants=["ads-sotw"], **FAST)
    lrs = [r for r in report.results if r.rule.id in {"lrs-interval-set", "lrs-accepts-reports"}]
    assert [r.detail for r in lrs] == ["the server does not serve LRS"] * 2
    assert report.ok


async def test_a_variant_asked_for_but_not_served_is_exit_6() -> None:
    """Asking for xds-sotw from an ADS-only server is not a pass: exit 6, naming it."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        async with servers.grpc_server(*servers.ads_only(control_plane)) as address:
            report = await check(address, variants=["xds-sotw"], **FAST)
            code, _, err = await cli(
                "check", "--server", address, "--variants", "xds-sotw", *CLI_FAST
            )
    assert not report.ok
    assert report.not_served.startswith("not served: xds-sotw (UNIMPLEMENTED")
    assert code == 6
    assert "nothing to check" in one_line(err)


async def test_a_server_serving_no_resources_to_the_node_is_exit_6() -> None:
    """An xDS server with nothing for this node proves nothing: not ok, exit 6; the rules that
    had nothing to run on (no reference to follow, no resource to name twice) are N/A, not
    PASS, in the table printed beside "NOT SERVED"."""
    async with ControlPlane() as control_plane:
        report = await check(control_plane.address, variants=["ads-sotw"], **FAST)
        code, out, err = await cli(
            "check", "--server", control_plane.address, "--variants", "ads-sotw", *CLI_FAST
        )
    assert report.not_served == "no resources were served to this node in any variant"
    assert not report.ok
    assert code == 6
    assert one_line(err).endswith("no resources were served to this node in any variant")
    assert report.status(RuleId.REFERENCES_RESOLVE, "ads-sotw") == "N/A"
    rows = {line.split()[0]: line.split()[2:] for line in out.splitlines() if "  " in line}
    assert rows["references-resolve"] == ["N/A"]
    assert rows["no-duplicate-names"] == ["N/A"]  # no resource to name twice
    assert "NOT SERVED: no resources were served to this node in any variant" in out


@pytest.mark.parametrize("resources", ["one-per-type", "demo"])
async def test_a_server_demanding_node_on_every_request_fails_only_the_node_rule(
    resources: str,
) -> None:
    """NODE_REQUIRED fails node-first-request-only in every variant and no other rule, with
    one resource per type (no second name to add) as with several."""
    served = (
        [
            builders.api_listener("l"),
            builders.route_configuration("l-routes", {"/": "c"}),
            builders.cluster("c"),
            builders.cluster_load_assignment("c", [("10.0.0.1", 80)]),
        ]
        if resources == "one-per-type"
        else demo_resources("shop.example.com")
    )
    variants = ["ads-sotw", "xds-delta"]
    async with ControlPlane(bugs={SeededBug.NODE_REQUIRED}) as control_plane:
        control_plane.set_all(served)
        report = await check(control_plane.address, variants=variants, **FAST)
    failed = {(f.rule.id, f.variant) for f in report.failures}
    assert failed == {(RuleId.NODE_FIRST_REQUEST_ONLY, v) for v in variants}, report.table()
    assert "with one was answered" in report.failures[0].detail


async def test_aggregate_cluster_children_are_followed_from_a_listener() -> None:
    """From --listener, the children of an aggregate cluster are fetched by name, their
    endpoints too, and a child not served fails references-resolve."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(
            [
                builders.api_listener("shop"),
                builders.route_configuration("shop-routes", {"/": "agg"}),
                builders.aggregate_cluster("agg", ["a", "gone"]),
                builders.cluster("a"),
                builders.cluster_load_assignment("a", [("10.0.0.1", 80)]),
            ]
        )
        report = await check(
            control_plane.address, variants=["ads-sotw"], listeners=["shop"], **FAST
        )
        eds_asked = {
            name
            for r in control_plane.requests
            if r.type_url == ENDPOINT.type_url
            for name in r.message.resource_names
        }
    assert report.discovered == {"ads-sotw": 5}
    assert "a" in eds_asked
    (failure,) = report.failures
    assert failure.rule.id is RuleId.REFERENCES_RESOLVE
    assert failure.detail == "not served: cluster gone"


async def test_node_metadata_reaches_a_server_that_selects_by_node(tmp_path: Path) -> None:
    """A server serving only nodes with tenant=shop: without --node-metadata nothing is served
    (exit 6), with it every variant passes (exit 0)."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        handlers = servers.selecting_by_node(control_plane.address, "tenant", "shop")
        async with servers.grpc_server(*handlers) as address:
            args = ("check", "--server", address, "--variants", "ads-delta", "--quiet-window")
            without = await cli(*args, "0.2", "--timeout", "0.3")
            with_it = await cli(
                *args,
                "0.2",
                "--timeout",
                "1",
                "--node-metadata",
                "tenant=shop",
                "--node-metadata",
                "x=",
            )
    assert without[0] == 6, without
    assert "no resources were served to this node" in one_line(without[2])
    assert with_it[0] == 0, with_it
    assert with_it[2] == ""


@pytest.mark.parametrize(
    "args",
    [
        ("--node-metadata", "novalue"),
        ("--node-metadata", "=v"),
        ("--node-metadata", "k=1", "--node-metadata", "k=2"),
        ("--timeout", "0"),
        ("--quiet-window", "-1"),
    ],
)
async def test_bad_check_arguments_are_usage_errors(args: tuple[str, ...]) -> None:
    """Malformed node metadata, a key given twice, or a non-positive time is exit 2."""
    code, _, err = await cli("check", "--server", servers.closed_port(), *args)
    assert code == 2, err
    assert "Traceback" not in err


async def test_an_unwritable_junit_file_is_exit_3(tmp_path: Path) -> None:
    """A --junit path that cannot be written is one line and exit 3, after the report."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        junit = tmp_path / "missing-dir" / "check.xml"
        code, out, err = await cli(
            "check",
            "--server",
            control_plane.address,
            "--variants",
            "ads-sotw",
            "--junit",
            str(junit),
            *CLI_FAST,
        )
    assert code == 3
    assert "node-first-request-only" in out
    assert one_line(err).startswith(f"xdsclient: --junit {junit}: No such file")


async def test_the_exit_statuses_are_in_the_check_help() -> None:
    """``check --help`` ends with the exit-status table the code uses."""
    code, out, _ = await cli("check", "--help")
    assert code == 0
    assert EPILOG.strip() in out
    for status in ("0", "1", "2", "3", "4", "6"):
        assert f"\n  {status}  " in out


async def test_a_write_to_a_stream_the_server_ended_raises_stream_ended_with_its_status() -> None:
    """A write after the server ended the stream (UNIMPLEMENTED) is `StreamEnded` carrying the
    server's status, as a read would be."""
    async with (
        ControlPlane() as control_plane,
        servers.grpc_server(*servers.ads_only(control_plane)) as address,
        grpc.aio.insecure_channel(address) as channel,
    ):
        probe = Probe(channel, ads=False, delta=False, type_url=LISTENER.type_url, node=Node())
        try:
            assert await probe.ended_within(1.0)
            with pytest.raises(StreamEnded) as ended:
                await probe.send(type_url=LISTENER.type_url)
        finally:
            await probe.close()
    assert ended.value.code == "UNIMPLEMENTED"
    assert probe.unwritten
