"""Conformance checks for xDS management servers: ``xdsclient check`` as a library.

`check` connects to a running control plane, discovers what it serves (wildcard LDS and CDS and
the names they reference, or the listeners and resources given), and runs protocol scenarios in
each transport variant (ADS or per-type streams, SotW or Delta), reporting every rule of `RULES`
as PASS, FAIL (with the evidence) or N/A. A rule has an id, a level (MUST or SHOULD, from the
spec's wording) and its source (a section of the xDS protocol document or a gRFC).

    report = await check("127.0.0.1:18000")
    print(report.table())
    assert report.ok  # no MUST rule failed
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import grpc
from envoy.config.core.v3 import base_pb2

from ._checks import Context, Finding, run_variant
from ._probe import Probe, StreamEnded
from ._report import Report, RuleResult, summarize
from ._rules import RULES, Level, Rule

__all__ = ["RULES", "VARIANTS", "Finding", "Level", "Report", "Rule", "RuleResult", "check"]

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
    quiet: float = 1.0,
    timeout: float = 5.0,
    channel_credentials: grpc.ChannelCredentials | None = None,
) -> Report:
    """Check the management server at ``server`` (host:port).

    ``variants``: names from `VARIANTS` (default: every one the server answers; one it does not
    is skipped, or reported as failing when asked for explicitly). ``listeners`` /
    ``resources`` ((type URL, name) pairs): what to start from instead of wildcard discovery.
    ``quiet``: how long silence must last to count as "no response"; ``timeout``: how long to
    wait for an expected response.
    """
    chosen = list(variants) if variants is not None else list(VARIANTS)
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}: choose from {', '.join(VARIANTS)}")
    node = base_pb2.Node(id=node_id, user_agent_name="xdsclient-check")
    findings: list[Finding] = []
    skipped: dict[str, str] = {}
    async with _channel(server, channel_credentials) as channel:
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
            if why is not None and variants is None:
                skipped[name] = why
                continue
            findings.extend(await run_variant(context))
    done = [v for v in chosen if v not in skipped]
    return Report(results=tuple(summarize(findings, done)), skipped=skipped)


async def _unserved(context: Context) -> str | None:
    """Why the server does not serve this variant (UNIMPLEMENTED), or None."""
    async with context.probe(_LDS) as probe:
        await probe.send(type_url=_LDS)
        try:
            await probe.recv(context.timeout)
        except StreamEnded as exc:
            if "UNIMPLEMENTED" in str(exc):
                return str(exc)
    return None


def _channel(server: str, credentials: grpc.ChannelCredentials | None) -> grpc.aio.Channel:
    if credentials is None:
        return grpc.aio.insecure_channel(server)
    return grpc.aio.secure_channel(server, credentials)


for _cls in (Finding, Report, Rule, RuleResult, Probe):
    _cls.__module__ = __name__
