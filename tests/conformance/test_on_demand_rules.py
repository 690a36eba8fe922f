"""`xdsclient check`'s on-demand rules against the test control plane: on-demand CDS and
VHDS pass where the server serves them, the route-change rule is judged only when the route
configuration changes while the checker watches, and every rule is N/A where not served."""

from __future__ import annotations

import asyncio
from typing import Any

from envoy.config.route.v3 import route_components_pb2, route_pb2

from tests.builders import cluster, endpoints
from xdsclient.conformance import Report, RuleId, check
from xdsclient.resources import VIRTUAL_HOST
from xdsclient.testing import ControlPlane, SeededBug

FAST: dict[str, Any] = {"quiet": 0.3, "timeout": 1.5}
ON_DEMAND = (
    RuleId.ODCDS_UNKNOWN_CLUSTER,
    RuleId.ODCDS_KNOWN_CLUSTER,
    RuleId.VHDS_UNKNOWN_HOST,
    RuleId.VHDS_RESENT_AFTER_ROUTE_CHANGE,
)


def route_config(marker: str) -> Any:
    message = route_pb2.RouteConfiguration(name="routes")
    message.vhds.config_source.ads.SetInParent()
    message.request_headers_to_add.add().header.key = marker
    return message


def listener_to(route: str) -> Any:
    from tests.builders import listener

    return listener("svc", route=route)


def serve_vhds(control_plane: ControlPlane) -> None:
    vhost = route_components_pb2.VirtualHost(name="routes/vh", domains=["svc"])
    vhost.routes.add().match.prefix = "/"
    control_plane.set_all(
        [listener_to("routes"), route_config("v1"), vhost, cluster("a"), endpoints("a")]
    )


def status(report: Report, rule: RuleId, variant: str) -> str:
    return report.status(rule, variant)


async def test_a_server_serving_vhds_and_clusters_passes_the_on_demand_rules() -> None:
    """Unknown cluster in removed_resources, unknown host body-less under its alias: PASS;
    the route configuration never changed: the re-send rule is N/A; SotW: all N/A."""
    async with ControlPlane() as control_plane:
        serve_vhds(control_plane)
        report = await check(control_plane.address, variants=["ads-delta", "ads-sotw"], **FAST)
    assert report.failures == [], report.table()
    assert [status(report, r, "ads-delta") for r in ON_DEMAND] == ["PASS", "PASS", "PASS", "N/A"]
    assert [status(report, r, "ads-sotw") for r in ON_DEMAND] == ["N/A"] * 4


async def test_virtual_hosts_resent_after_a_route_change_pass() -> None:
    """The route configuration changes while the checker holds a host: the server sends the
    host's answer again, and the rule passes."""
    async with ControlPlane() as control_plane:
        serve_vhds(control_plane)

        async def change_the_route() -> None:
            await control_plane.wait_for_request(
                lambda r: r.type_url == VIRTUAL_HOST.type_url and bool(r.message.response_nonce),
                timeout=20.0,
            )
            control_plane.set(route_config("v2"))

        changer = asyncio.ensure_future(change_the_route())
        report = await check(control_plane.address, variants=["ads-delta"], **FAST)
        await changer
    assert status(report, RuleId.VHDS_RESENT_AFTER_ROUTE_CHANGE, "ads-delta") == "PASS", (
        report.table()
    )


async def test_a_server_without_vhds_has_the_vhds_rules_not_applicable() -> None:
    """A server whose route configurations carry no ``vhds``: the VHDS rules are N/A."""
    async with ControlPlane() as control_plane:
        control_plane.set_all([cluster("a")])
        report = await check(control_plane.address, variants=["ads-delta"], **FAST)
    assert status(report, RuleId.ODCDS_UNKNOWN_CLUSTER, "ads-delta") == "PASS"
    assert status(report, RuleId.VHDS_UNKNOWN_HOST, "ads-delta") == "N/A"


async def test_a_server_answering_late_subscriptions_only_at_a_change_fails_odcds() -> None:
    """A Delta server that takes a name subscribed on an answered stream as already sent
    (so it comes only at the type's next change) leaves a request-time resolve waiting:
    ``odcds-known-cluster`` fails naming the cluster, and the clean server passes it."""
    async with ControlPlane(bugs={SeededBug.LATE_SUBSCRIPTION_WAITS}) as control_plane:
        control_plane.set_all([cluster("a"), endpoints("a")])
        report = await check(control_plane.address, variants=["ads-delta"], **FAST)
    [finding] = [r for r in report.results if r.rule.id is RuleId.ODCDS_KNOWN_CLUSTER]
    assert finding.status == "FAIL", report.table()
    assert "a was not sent" in finding.detail
