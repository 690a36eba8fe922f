"""The load reporting (LRS) rules, for control planes that consume load reports (gRFC A27).

Why its own scenario: LRS is a stream of its own
(``envoy.service.load_stats.v3.LoadReportingService``), not discovery, so it does not go
through `Probe`. It sends what a gRPC client sends: the node, with the client feature
``envoy.lrs.supports_send_all_clusters``; reads the server's `LoadStatsResponse` (its
``load_reporting_interval`` must be positive, or a client has nothing to follow); then sends one
report (one call, succeeded, for a cluster the server asked for, else one it serves) and
expects the stream to stay open for the quiet window. A server that does not serve LRS
(UNIMPLEMENTED) makes both rules N/A.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.load_stats.v3 import lrs_pb2

from .._protocol._lrs import LRS_METHOD, SEND_ALL_CLUSTERS
from ..resources import CLUSTER
from ._context import Context
from ._probe import brief
from ._rules import RuleId

__all__ = ["scenario_lrs"]

_RULES = (RuleId.LRS_INTERVAL_SET, RuleId.LRS_ACCEPTS_REPORTS)
_FALLBACK_CLUSTER = "xdsclient-check"


async def scenario_lrs(ctx: Context) -> None:
    """Open an LRS stream, judge the server's answer, send one report, judge the stream."""
    node = base_pb2.Node()
    node.CopyFrom(ctx.node)
    node.client_features.append(SEND_ALL_CLUSTERS)
    call = _open(ctx)
    try:
        await _run(ctx, call, node)
    finally:
        call.cancel()


def _open(ctx: Context) -> Any:
    return ctx.channel.stream_stream(
        LRS_METHOD,
        request_serializer=lrs_pb2.LoadStatsRequest.SerializeToString,
        response_deserializer=lrs_pb2.LoadStatsResponse.FromString,
    )()


async def _server_status(ctx: Context) -> str | None:
    """How the server ends an LRS stream we write nothing on (``CODE: details``), or None if it
    does not within the timeout: a server that ends the stream while our request is being
    written leaves gRPC's own status (INTERNAL) in place of its own, as in discovery probing."""
    call = _open(ctx)
    try:
        response = await asyncio.wait_for(call.read(), ctx.timeout)
    except TimeoutError:
        return None
    except grpc.aio.AioRpcError as exc:
        return f"{exc.code().name}: {exc.details()}"
    finally:
        call.cancel()
    return await _status(call) if response is grpc.aio.EOF else None


async def _run(ctx: Context, call: Any, node: Any) -> None:
    answer = await _next(call, lrs_pb2.LoadStatsRequest(node=node), ctx.timeout)
    if isinstance(answer, str) and not answer.startswith("UNIMPLEMENTED"):
        status = await _server_status(ctx)
        if status is not None and status.startswith("UNIMPLEMENTED"):
            answer = status
    if answer is None or isinstance(answer, str):
        if answer is not None and answer.startswith("UNIMPLEMENTED"):
            for rule in _RULES:
                ctx.note(rule, None, "the server does not serve LRS")
            return
        why = answer or f"no response within {ctx.timeout:g} s"
        for rule in _RULES:
            ctx.note(rule, False, f"the first LRS request was not answered: {why}")
        return
    interval = answer.load_reporting_interval
    ctx.note(
        RuleId.LRS_INTERVAL_SET,
        interval.seconds > 0 or (interval.seconds == 0 and interval.nanos > 0),
        f"load_reporting_interval is {interval.seconds}s {interval.nanos}ns",
        f"<- {brief(answer)}",
    )
    report = _report(ctx, answer)
    ended = await _next(call, report, ctx.quiet)
    ctx.note(
        RuleId.LRS_ACCEPTS_REPORTS,
        not isinstance(ended, str),
        f"the stream ended after a report: {ended}",
        f"-> {brief(report)}",
    )


def _report(ctx: Context, answer: Any) -> Any:
    """One successful call in one locality, for a cluster the server wants."""
    served = sorted(ctx.served.get(CLUSTER.type_url, {}))
    cluster = (
        answer.clusters[0]
        if answer.clusters and not answer.send_all_clusters
        else (served[0] if served else _FALLBACK_CLUSTER)
    )
    request = lrs_pb2.LoadStatsRequest()
    stats = request.cluster_stats.add(cluster_name=cluster)
    stats.load_report_interval.CopyFrom(answer.load_reporting_interval)
    stats.upstream_locality_stats.add(total_successful_requests=1, total_issued_requests=1)
    return request


async def _next(call: Any, request: Any, seconds: float) -> Any:
    """Write ``request``, then the next response, None after ``seconds`` of silence, or how
    the stream ended (``CODE: details``)."""
    try:
        await call.write(request)
        response = await asyncio.wait_for(call.read(), seconds)
    except TimeoutError:
        return None
    except grpc.aio.AioRpcError as exc:
        return f"{exc.code().name}: {exc.details()}"
    except (asyncio.InvalidStateError, grpc.aio.UsageError):
        return await _status(call)
    if response is grpc.aio.EOF:
        return await _status(call)
    return response


async def _status(call: Any) -> str:
    code = await call.code()
    return f"{code.name}: {await call.details()}"
