"""The on-demand rules: for servers that serve clusters over Delta (on-demand CDS, as Envoy
uses it) or route configurations whose virtual hosts come from VHDS.

Why apart: these rules apply only to servers that claim the feature, and N/A is their answer
for every other server (a rule never noted is N/A). A Delta server serving clusters claims
on-demand CDS (a Delta subscription by name is how Envoy's on-demand CDS asks); a server
serving a route configuration with ``vhds`` claims VHDS, on Delta and on an ADS stream (which
carries the route configuration and its virtual hosts together).

- ``odcds-unknown-cluster``: a cluster the server does not have is named in
  ``removed_resources`` (what Envoy's on-demand CDS takes as "missing").
- ``odcds-known-cluster``: then, on the same stream, a cluster the server has is sent at once
  with its body when subscribed (a request-time resolve waits for it; a server answering
  only at the type's next change leaves it waiting).
- ``vhds-unknown-host``: a host no virtual host matches is answered with a ``Resource`` whose
  name and aliases are the ``<route configuration>/<host>`` asked for, and no body.
- ``vhds-resent-after-route-change``: once the route configuration changes, the virtual hosts
  the client holds are sent again (Envoy: the change clears the client's table). Judged only
  when the server changes the route configuration while the checker watches (N/A otherwise).
"""

from __future__ import annotations

from typing import Any

from envoy.config.route.v3 import route_pb2

from ..resources import CLUSTER, ROUTE_CONFIGURATION, VIRTUAL_HOST
from ._context import Context
from ._probe import Probe
from ._rules import RuleId

__all__ = ["scenario_on_demand"]

_NO_CLUSTER = "xdsclient-conformance-no-such-cluster"
_NO_HOST = "xdsclient-conformance-no-such-host.invalid"


async def scenario_on_demand(ctx: Context) -> None:
    """Delta only: on-demand CDS for a server serving clusters, VHDS for one with ``vhds``."""
    if not ctx.delta:
        return
    if ctx.served.get(CLUSTER.type_url):
        await _unknown_cluster(ctx)
    route_config = _vhds_route_config(ctx)
    if route_config is not None and ctx.ads:
        await _vhds(ctx, route_config)


async def _unknown_cluster(ctx: Context) -> None:
    async with ctx.probe(CLUSTER.type_url) as probe:
        probe.step = RuleId.ODCDS_UNKNOWN_CLUSTER
        await ctx.subscribe(probe, CLUSTER.type_url, [_NO_CLUSTER])
        response = await ctx.receive(probe, CLUSTER.type_url)
        removed = response is not None and _NO_CLUSTER in response.removed_resources
        ctx.note(
            RuleId.ODCDS_UNKNOWN_CLUSTER,
            removed,
            "no answer" if response is None else "not named in removed_resources",
            probe.evidence(),
        )
        if response is None:
            return
        await probe.ack(response)
        known = sorted(ctx.served[CLUSTER.type_url])[0]
        probe.step = RuleId.ODCDS_KNOWN_CLUSTER
        await ctx.subscribe(probe, CLUSTER.type_url, [known])
        sent = await _until_sent(ctx, probe, known)
        ctx.note(RuleId.ODCDS_KNOWN_CLUSTER, sent, f"{known} was not sent", probe.evidence())


async def _until_sent(ctx: Context, probe: Probe, name: str) -> bool:
    """Responses (each ACKed) until one carries ``name`` with a body, or silence."""
    for _ in range(4):
        response = await ctx.receive(probe, CLUSTER.type_url)
        if response is None:
            return False
        await probe.ack(response)
        if any(r.name == name and r.HasField("resource") for r in response.resources):
            return True
    return False


def _vhds_route_config(ctx: Context) -> str | None:
    """The first served route configuration that takes its virtual hosts from VHDS."""
    for name, (_, body) in sorted(ctx.served.get(ROUTE_CONFIGURATION.type_url, {}).items()):
        try:
            message = route_pb2.RouteConfiguration.FromString(body)
        except Exception:  # an invalid body is another rule's finding
            continue
        if message.HasField("vhds"):
            return name
    return None


async def _vhds(ctx: Context, route_config: str) -> None:
    host = f"{route_config}/{_NO_HOST}"
    async with ctx.probe(VIRTUAL_HOST.type_url) as probe:
        probe.step = RuleId.VHDS_UNKNOWN_HOST
        await ctx.subscribe(probe, ROUTE_CONFIGURATION.type_url, [route_config])
        await ctx.subscribe(probe, VIRTUAL_HOST.type_url, [host])
        answer, rc_version = None, ""
        for _ in range(8):
            response = await _next(ctx, probe)
            if response is None:
                break
            await probe.ack(response)
            if response.type_url == ROUTE_CONFIGURATION.type_url:
                rc_version = _version_of(response, route_config) or rc_version
            elif response.type_url == VIRTUAL_HOST.type_url:
                answer = next((r for r in response.resources if host in r.aliases), None)
                if answer is not None and rc_version:
                    break
        told = answer is not None and answer.name == host and not answer.HasField("resource")
        detail = "no answer" if answer is None else "not a body-less resource named by the host"
        ctx.note(RuleId.VHDS_UNKNOWN_HOST, told, detail, probe.evidence())
        if answer is None:
            return
        probe.step = RuleId.VHDS_RESENT_AFTER_ROUTE_CHANGE
        await _resent_after_change(ctx, probe, route_config, host, rc_version)


async def _next(ctx: Context, probe: Probe) -> Any:
    """The next response of the stream (the route configuration or its virtual hosts), checked
    against the per-response rules as a response of its own type; None on silence."""
    response = await probe.recv(ctx.timeout)
    if response is not None:
        known = (ROUTE_CONFIGURATION.type_url, VIRTUAL_HOST.type_url)
        ctx.inspect(probe, response, response.type_url if response.type_url in known else known[1])
    return response


async def _resent_after_change(
    ctx: Context, probe: Probe, route_config: str, host: str, rc_version: str
) -> None:
    """Wait for a change of the route configuration; then the host must be answered again."""
    changed = False
    for _ in range(8):
        response = await _next(ctx, probe)
        if response is None:
            if changed:
                ctx.note(
                    RuleId.VHDS_RESENT_AFTER_ROUTE_CHANGE,
                    False,
                    "the virtual hosts were not sent again",
                    probe.evidence(),
                )
            return  # no change while we watched: N/A
        await probe.ack(response)
        if response.type_url == ROUTE_CONFIGURATION.type_url:
            version = _version_of(response, route_config)
            changed = changed or (version is not None and version != rc_version)
        elif changed and any(host in r.aliases for r in response.resources):
            ctx.note(RuleId.VHDS_RESENT_AFTER_ROUTE_CHANGE, True)
            return


def _version_of(response: object, name: str) -> str | None:
    """The Delta version of ``name`` in ``response``, or None."""
    for resource in getattr(response, "resources", ()):
        if resource.name == name:
            return str(resource.version)
    return None
