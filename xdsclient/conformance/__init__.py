"""Conformance checks for xDS management servers: ``xdsclient check`` as a library.

`check` connects to a running control plane, discovers what it serves (wildcard LDS and CDS and
every name they reference, aggregate-cluster children included, or the listeners and resources
given), and runs protocol scenarios in each transport variant (ADS or per-type streams, SotW or
Delta), reporting every rule of `RULES` as PASS, FAIL (with the evidence) or N/A. A rule has an
id (`RuleId`), a level (MUST or SHOULD, from the spec's wording) and its source (a section of
the xDS protocol document or a gRFC).

    report = await check("127.0.0.1:18000")
    print(report.table())
    assert report.ok  # something was served, and no MUST rule failed

A server that cannot be reached raises `xdsclient.TransportError`; one that serves nothing
(no xDS service, no variant asked for, no resource for this node) gives a report that is not ok,
with `Report.not_served` saying why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence

import grpc
from envoy.config.core.v3 import base_pb2

from .._errors import TransportError
from ._checks import run_variant
from ._context import Context, Finding
from ._probe import Probe
from ._report import Report, RuleResult, summarize
from ._rules import RULES, Level, Rule, RuleId

__all__ = [
    "RULES",
    "VARIANTS",
    "Finding",
    "Level",
    "Report",
    "Rule",
    "RuleId",
    "RuleResult",
    "check",
]

#: variant name -> (ads, delta)
VARIANTS: dict[str, tuple[bool, bool]] = {
    "ads-sotw": (True, False),
    "ads-delta": (True, True),
    "xds-sotw": (False, False),
    "xds-delta": (False, True),
}
_LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"


async def check(
    server: str,
    *,
    variants: Sequence[str] | None = None,
    listeners: Iterable[str] = (),
    resources: Iterable[tuple[str, str]] = (),
    node_id: str = "xdsclient-check",
    node_metadata: Mapping[str, str] | None = None,
    quiet: float = 1.0,
    timeout: float = 5.0,
    channel_credentials: grpc.ChannelCredentials | None = None,
) -> Report:
    """Check the management server at ``server`` (host:port).

    ``variants``: names from `VARIANTS` (default: every one the server serves; one it does not
    is skipped, or, when asked for by name, makes the report not ok). ``listeners`` /
    ``resources`` ((type URL, name) pairs): what to start from instead of wildcard discovery.
    ``node_id`` / ``node_metadata``: the node presented (servers select resources by node).
    ``quiet``: how long silence must last to count as "no response"; ``timeout``: how long to
    wait for the connection and for an expected response.

    Raises `xdsclient.TransportError` when no connection is made within ``timeout``.
    """
    chosen = list(variants) if variants is not None else list(VARIANTS)
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}: choose from {', '.join(VARIANTS)}")
    node = base_pb2.Node(id=node_id, user_agent_name="xdsclient-check")
    node.metadata.update(dict(node_metadata or {}))
    findings: list[Finding] = []
    not_served: dict[str, str] = {}
    discovered: dict[str, int] = {}
    async with _channel(server, channel_credentials) as channel:
        await _connect(channel, server, timeout)
        for name in chosen:
            ads, delta = VARIANTS[name]
            context = Context(
                channel=channel,
                variant=name,
                ads=ads,
                delta=delta,
                node=node,
                quiet=quiet,
                timeout=timeout,
                listeners=tuple(listeners),
                resources=tuple(resources),
            )
            why = await _unserved(context)
            if why is not None:
                not_served[name] = why
                continue
            findings.extend(await run_variant(context))
            discovered[name] = sum(len(found) for found in context.served.values())
    return Report(
        results=tuple(summarize(findings, list(discovered))),
        skipped={} if variants is not None else not_served,
        unserved=not_served if variants is not None else {},
        discovered=discovered,
    )


async def _connect(channel: grpc.aio.Channel, server: str, timeout: float) -> None:
    """Wait for the channel to connect (gRPC retries meanwhile, so a server still starting
    up is waited for); `TransportError` when it has not within ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            await channel.channel_ready()
    except TimeoutError:
        state = channel.get_state().name.lower().replace("_", " ")
        raise TransportError(
            f"cannot connect to {server} within {timeout:g} s (channel {state})",
            code="UNAVAILABLE",
        ) from None


async def _unserved(context: Context) -> str | None:
    """Why the server does not serve this variant (its LDS method is UNIMPLEMENTED), or None.

    A server that ends the stream before our request is written leaves gRPC's own status in
    place of its own; a second stream that writes nothing then reads the server's.
    """
    async with context.probe(_LDS) as probe:
        probe.step = None  # judged here: only UNIMPLEMENTED means "not served"
        await probe.send(type_url=_LDS)
        await probe.recv(context.timeout)
    if probe.unwritten:
        async with context.probe(_LDS) as probe:
            await probe.ended_within(context.timeout)
    return probe.ended if probe.code == "UNIMPLEMENTED" else None


def _channel(server: str, credentials: grpc.ChannelCredentials | None) -> grpc.aio.Channel:
    if credentials is None:
        return grpc.aio.insecure_channel(server)
    return grpc.aio.secure_channel(server, credentials)


for _cls in (Finding, Report, Rule, RuleResult, Probe, RuleId, Level):
    _cls.__module__ = __name__
