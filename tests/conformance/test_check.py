"""`xdsclient check` against our control plane: the clean one passes every rule in every
variant, each seeded protocol bug fails at least one rule, invalid resources are findings with
the field path, and the reports print as a table, JSON and JUnit XML."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from tests.builders import cluster
from tests.test_cli import cli
from xdsclient.conformance import RULES, Finding, Level, Report, RuleId, check
from xdsclient.conformance._mutations import run_seeded
from xdsclient.conformance._report import summarize
from xdsclient.resources import ENDPOINT
from xdsclient.testing import ControlPlane, SeededBug, builders, demo_resources

FAST: dict[str, Any] = {"quiet": 0.3, "timeout": 1.5}


def test_there_are_at_least_30_rules_each_with_a_level_and_a_source() -> None:
    assert len(RULES) >= 30
    assert {rule.level for rule in RULES.values()} == {Level.MUST, Level.SHOULD}
    assert all(rule.source and rule.text for rule in RULES.values())


@pytest.mark.timeout(120)
async def test_the_clean_control_plane_passes_and_every_seeded_bug_fails_a_rule() -> None:
    reports = await run_seeded(**FAST)
    clean = reports.pop(None)
    assert clean.failures == [], clean.table()
    assert {r.variant for r in clean.results} == {"ads-sotw", "ads-delta", "xds-sotw", "xds-delta"}
    passed = {r.rule.id for r in clean.results if r.status == "PASS"}
    assert len(passed) >= 29  # all but the TTL rule (the demo serves no TTLs)
    uncaught = [str(bug) for bug, report in reports.items() if not report.failures]
    assert uncaught == []
    assert len(reports) == len(SeededBug) >= 12


async def test_the_control_planes_lrs_server_passes_the_lrs_rules() -> None:
    """The test control plane's LRS server answers with an interval and takes the checker's
    report: both LRS rules pass, and the report reaches it."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        report = await check(control_plane.address, variants=["ads-sotw"], **FAST)
        reports = control_plane.load_reports
    passed = {r.rule.id for r in report.results if r.status == "PASS"}
    assert {RuleId.LRS_INTERVAL_SET, RuleId.LRS_ACCEPTS_REPORTS} <= passed
    assert [
        r.message.cluster_stats[0].upstream_locality_stats[0].total_issued_requests for r in reports
    ] == [1]


async def test_an_invalid_resource_is_a_finding_naming_the_field() -> None:
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        broken = cluster("web")
        broken.eds_cluster_config.eds_config.path_config_source.path = "/x"
        control_plane.set(broken)
        report = await check(control_plane.address, variants=["ads-sotw"], **FAST)
    (failure,) = [f for f in report.failures if f.rule.id == "resources-valid"]
    assert "eds_cluster_config.eds_config" in failure.detail
    assert "envoy.config.cluster.v3.Cluster" in failure.evidence
    assert not report.ok  # resources-valid is a MUST


async def test_reports_print_as_a_table_json_and_junit() -> None:
    async with ControlPlane(bugs={SeededBug.EMPTY_VERSION}) as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        report = await check(control_plane.address, variants=["xds-sotw"], **FAST)
    assert report.ok  # a SHOULD rule failed, no MUST
    assert "FAIL sotw-version-present (SHOULD" in report.table()
    data = json.loads(report.to_json())
    assert data["ok"] is True
    assert {
        "rule": "sotw-version-present",
        "variant": "xds-sotw",
        "status": "FAIL",
    }.items() <= next(r for r in data["results"] if r["rule"] == "sotw-version-present").items()
    suite = ElementTree.fromstring(report.to_junit())
    assert suite.get("failures") == "1"
    failed = [c for c in suite if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["sotw-version-present [SHOULD]"]


async def test_the_cli_exits_nonzero_on_a_must_failure_and_writes_junit(tmp_path: Path) -> None:
    async with ControlPlane(bugs={SeededBug.NO_NONCE}) as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        junit = tmp_path / "check.xml"
        code, out, err = await cli(
            "check",
            "--server",
            control_plane.address,
            "--variants",
            "ads-sotw",
            "--quiet-window",
            "0.3",
            "--timeout",
            "1.5",
            "--junit",
            str(junit),
        )
    assert code == 1, err
    assert "FAIL nonce-present (MUST" in out
    assert "a MUST rule failed" in err
    assert ElementTree.parse(junit).getroot().get("failures") != "0"


async def test_the_cli_passes_a_clean_server_with_json_output() -> None:
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        code, out, err = await cli(
            "check",
            "--server",
            control_plane.address,
            "--variants",
            "ads-delta",
            "--json",
            "--listener",
            "shop.example.com",
            "--quiet-window",
            "0.3",
            "--timeout",
            "1.5",
        )
    assert code == 0, out + err
    assert json.loads(out)["ok"] is True


async def _heartbeats(control_plane: ControlPlane, name: str, period: float) -> None:
    while True:
        await asyncio.sleep(period)
        control_plane.heartbeat(ENDPOINT.type_url, name)


@pytest.mark.parametrize("heartbeat", [True, False], ids=["refreshed", "left-to-expire"])
async def test_a_ttl_must_be_refreshed_before_it_expires(heartbeat: bool) -> None:
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        control_plane.set(builders.cluster_load_assignment("web", [("10.0.0.1", 80)]), ttl=1.0)
        beating = asyncio.ensure_future(_heartbeats(control_plane, "web", 0.3))
        if not heartbeat:
            beating.cancel()
        try:
            report = await check(control_plane.address, variants=["ads-delta", "ads-sotw"], **FAST)
        finally:
            beating.cancel()
    statuses = {r.variant: r.status for r in report.results if r.rule.id == "ttl-refreshed"}
    assert statuses == dict.fromkeys(("ads-delta", "ads-sotw"), "PASS" if heartbeat else "FAIL")


async def _keep_changing(
    control_plane: ControlPlane, assignments: list[Any], period: float
) -> None:
    """Every ``period``, each assignment with a new port: content that really changes."""
    for port in itertools.count(9000):
        await asyncio.sleep(period)
        for message in assignments:
            endpoint = message.endpoints[0].lb_endpoints[0].endpoint
            endpoint.address.socket_address.port_value = port
        control_plane.set_all(assignments)


async def test_an_update_after_an_ack_is_not_an_echo() -> None:
    """A server whose endpoints change while the checker waits after an ACK (as the demo's
    do) sends responses with new content: updates, not echoes, so no-response-to-ack passes
    (it failed against ``xdsclient serve``); a server that echoes still fails it (the seeded
    ``ECHO_ON_ACK`` bug, above)."""
    resources = demo_resources("shop.example.com")
    assignments = [r for r in resources if r.DESCRIPTOR.full_name.endswith("LoadAssignment")]
    async with ControlPlane() as control_plane:
        control_plane.set_all(resources)
        changing = asyncio.ensure_future(_keep_changing(control_plane, assignments, 0.1))
        try:
            report = await check(control_plane.address, variants=["ads-sotw", "ads-delta"], **FAST)
        finally:
            changing.cancel()
    statuses = {r.variant: r.status for r in report.results if r.rule.id == "no-response-to-ack"}
    assert statuses == dict.fromkeys(("ads-sotw", "ads-delta"), "PASS")


def test_a_misspelt_rule_id_is_an_error_not_a_silent_na() -> None:
    """Rules are named by `RuleId`: a finding or a look-up with an unknown id raises."""
    assert set(RULES) == set(RuleId)
    with pytest.raises(ValueError, match="nonce-presnt"):
        Finding("nonce-presnt", "ads-sotw", True)
    found = [Finding(RuleId.NONCE_PRESENT, "ads-sotw", True)]
    report = Report(results=tuple(summarize(found, ["ads-sotw"])), discovered={"ads-sotw": 1})
    assert report.status("nonce-present", "ads-sotw") == "PASS"
    with pytest.raises(ValueError, match="nonce-presnt"):
        report.status("nonce-presnt", "ads-sotw")


def test_a_report_item_carries_its_rule_s_level() -> None:
    """``item.level`` is the rule's level (``item.rule.level`` still works), FAIL or not."""
    found = [Finding(RuleId.NONCE_UNIQUE, "ads-sotw", False, "nonce 'n' reused")]
    report = Report(results=tuple(summarize(found, ["ads-sotw"])), discovered={"ads-sotw": 1})
    (failure,) = report.failures
    assert failure.level is Level.SHOULD
    assert report.ok  # a failing SHOULD does not make it not ok
    by_rule = {r.rule.id: r for r in report.results}
    assert by_rule[RuleId.NONCE_PRESENT].level is Level.MUST
    assert all(r.level is r.rule.level is RULES[r.rule.id].level for r in report.results)


def test_a_body_is_the_same_when_it_parses_to_the_same_message_and_never_when_it_cannot() -> None:
    """An echo is told by content: fields in another order (a server may serialize maps in any
    order) are the same resource; a body that does not parse is not, and raises nothing."""
    from envoy.config.endpoint.v3 import endpoint_pb2

    from xdsclient.conformance._checks import _same

    named = endpoint_pb2.ClusterLoadAssignment(cluster_name="web").SerializeToString()
    policy = endpoint_pb2.ClusterLoadAssignment(
        policy=endpoint_pb2.ClusterLoadAssignment.Policy(overprovisioning_factor={"value": 140})
    ).SerializeToString()
    assert named + policy != policy + named
    assert _same(ENDPOINT.type_url, named + policy, policy + named)
    assert not _same(ENDPOINT.type_url, named, policy)
    assert not _same(ENDPOINT.type_url, named, b"\xff\xff\xff")
    assert not _same(ENDPOINT.type_url, None, named)
    assert not _same("type.googleapis.com/no.Such", named, named + b"\x08\x01")
