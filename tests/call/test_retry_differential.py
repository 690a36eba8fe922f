"""Retry attempts per call against grpcio's own ``xds:///`` channel (gRFC A44).

A real backend fails every attempt with UNAVAILABLE and records each attempt's
``grpc-previous-rpc-attempts``; grpcio's xDS client (a child process) makes one call per
route. Our `CallPlan` runs the same calls with each attempt's outcome as the backend gives it.
Compared: how many attempts each call makes (``num_retries + 1`` capped at 5, the virtual
host's policy when the route has none, only ``retry_on`` codes, none after a negative server
pushback, none once the server sent its response headers), the ``grpc-previous-rpc-attempts``
of each attempt, and the final status.
"""

from __future__ import annotations

import contextlib
import random
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.config.route.v3 import route_pb2

from tests.lb.differential_pickers import run_grpcio
from xdsclient._call import (
    ActiveFaults,
    Attempt,
    AttemptOutcome,
    CallConfig,
    CallPlan,
    CallRequest,
    Code,
    Finish,
    RetryAt,
)
from xdsclient.resources import ListenerView, RouteConfigurationView
from xdsclient.testing import ControlPlane, builders

from .builders import add_route, listener

LISTENER = "retry"
CLUSTER = "failing"
METHODS = (
    "/r3.Svc/Fail",
    "/r10.Svc/Fail",
    "/internal.Svc/Fail",
    "/vh.Svc/Fail",
    "/r3.Svc/Pushback",
    "/r3.Svc/Committed",
)

_CHILD = r"""
import json, sys, grpc
channel = grpc.insecure_channel("xds:///" + sys.argv[1])
out = []
for method in json.loads(sys.stdin.read()):
    try:
        channel.unary_unary(method)(b"", wait_for_ready=True, timeout=20)
        out.append(["OK", ""])
    except grpc.RpcError as error:
        out.append([error.code().name, error.details()])
print(json.dumps(out), flush=True)
"""


class _Failing(grpc.GenericRpcHandler):
    """Fails every call with UNAVAILABLE ``down``; records each attempt's
    ``grpc-previous-rpc-attempts`` by method. ``.../Pushback`` also says do not retry;
    ``.../Committed`` sends its response headers first."""

    def __init__(self) -> None:
        self.attempts: dict[str, list[str | None]] = defaultdict(list)

    def service(self, handler_call_details: Any) -> Any:
        method = handler_call_details.method

        async def fail(request: bytes, context: Any) -> bytes:
            metadata = dict(context.invocation_metadata())
            self.attempts[method].append(metadata.get("grpc-previous-rpc-attempts"))
            if method.endswith("/Pushback"):
                context.set_trailing_metadata((("grpc-retry-pushback-ms", "-1"),))
            if method.endswith("/Committed"):
                await context.send_initial_metadata(())
            await context.abort(grpc.StatusCode.UNAVAILABLE, "down")
            raise AssertionError("unreachable")

        return grpc.unary_unary_rpc_method_handler(fail)


@contextlib.asynccontextmanager
async def _backend() -> AsyncIterator[tuple[int, _Failing]]:
    handler = _Failing()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([handler])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield port, handler
    finally:
        await server.stop(None)


def _routes() -> Any:
    routes = route_pb2.RouteConfiguration(name=f"{LISTENER}-routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=[LISTENER])
    vhost.retry_policy.retry_on = "unavailable"
    vhost.retry_policy.num_retries.value = 1
    for prefix, retry_on, retries in (
        ("/r3.Svc/", "unavailable", 3),
        ("/r10.Svc/", "unavailable,cancelled", 10),
        ("/internal.Svc/", "internal", 3),
    ):
        route = add_route(vhost, prefix, CLUSTER)
        route.route.retry_policy.retry_on = retry_on
        route.route.retry_policy.num_retries.value = retries
    add_route(vhost, "/vh.Svc/", CLUSTER)
    return routes


def _resources(port: int) -> list[Any]:
    spec = builders.LocalitySpec(endpoints=[("127.0.0.1", port)], region="r")
    return [
        listener(name=LISTENER, rds=f"{LISTENER}-routes"),
        _routes(),
        builders.cluster(CLUSTER, eds_service_name=f"{CLUSTER}-svc"),
        builders.cluster_load_assignment(f"{CLUSTER}-svc", [spec]),
    ]


def _outcome(method: str) -> AttemptOutcome:
    """The outcome of one attempt as the backend gives it, classified as a front end does."""
    return AttemptOutcome(
        code=Code.UNAVAILABLE,
        details="down",
        committed=method.endswith("/Committed"),
        pushback="-1" if method.endswith("/Pushback") else None,
    )


def _ours(resources: list[Any]) -> tuple[dict[str, list[str | None]], list[list[str]]]:
    view = ListenerView.from_proto(resources[0])
    config = CallConfig.from_listener(view, RouteConfigurationView.from_proto(resources[1]))
    attempts: dict[str, list[str | None]] = {}
    statuses = []
    for method in METHODS:
        request = CallRequest(authority=LISTENER, path=method, deadline=20.0)
        plan = CallPlan.begin(request, config, now=0.0, rng=random.Random(0), faults=ActiveFaults())
        step = plan.start(0.0)
        headers: list[str | None] = []
        while not isinstance(step, Finish):
            if isinstance(step, RetryAt):
                step = plan.backoff_elapsed(step.at)
                continue
            assert isinstance(step, Attempt)
            headers.append(str(step.previous_attempts) if step.previous_attempts else None)
            step = plan.attempt_done(_outcome(method), 0.0)
        attempts[method] = headers
        statuses.append([step.status.code.name, step.status.details])
    return attempts, statuses


async def _grpc(resources: list[Any]) -> list[list[str]]:
    async with ControlPlane() as plane:
        plane.set_all(resources)
        statuses: list[list[str]] = await run_grpcio(
            plane, "retry-diff", _CHILD, (LISTENER,), METHODS
        )
    return statuses


async def test_retry_attempts_and_final_status_match_grpcio() -> None:
    """Every call makes the attempts grpcio makes, with its previous-attempt counts, and ends
    with the same status."""
    async with _backend() as (port, handler):
        resources = _resources(port)
        theirs = await _grpc(resources)
    attempts, ours = _ours(resources)
    assert dict(handler.attempts) == attempts
    assert ours == theirs
