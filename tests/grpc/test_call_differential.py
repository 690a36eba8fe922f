"""`XdsChannel`'s retries, fault injection and ``max_stream_duration`` against grpcio's own
``xds:///`` channel, with one control plane and real backends.

Why: gRFC A44 (retries), A33 (fault injection) and A31 (``max_stream_duration``) decide how
many attempts a call makes, how it ends and how long it takes; C-core is their reference. The
backend counts the attempts of each call (by a call id in its metadata); rates are compared
within a statistical bound of the configured percentage, delays by the time the calls took."""

from __future__ import annotations

import collections
from typing import Any

from envoy.config.route.v3 import route_pb2

from tests.call.builders import add_route, fault, listener, override
from xdsclient.testing import ControlPlane

from .differential import Call, Result, both, ours, theirs
from .echo import EchoBackend, cluster_of, echo_backends


def _retrying(name: str, retries: int) -> Any:
    routes = route_pb2.RouteConfiguration(name=f"{name}-routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=[name]), "", "echo")
    policy = route.route.retry_policy
    policy.retry_on = "unavailable,cancelled"
    policy.num_retries.value = retries
    policy.retry_back_off.base_interval.FromMilliseconds(5)
    policy.retry_back_off.max_interval.FromMilliseconds(20)
    return [listener(name=name, rds=routes.name), routes]


RETRY_CALLS = [
    Call(listener="retry", value="fail:UNAVAILABLE", metadata=(("x-call", "1"),)),
    Call(listener="retry", value="fail:CANCELLED", metadata=(("x-call", "2"),)),
    Call(listener="retry", value="fail:INTERNAL", metadata=(("x-call", "3"),)),
    Call(listener="retry", value="ok", metadata=(("x-call", "4"),)),
    Call(listener="retry-once", value="fail:UNAVAILABLE", metadata=(("x-call", "5"),)),
]


def _attempts(backend: EchoBackend, start: int) -> dict[str, int]:
    """Attempts per call id, of the calls the backend served from the ``start``-th on."""
    return dict(collections.Counter(str(m.get("x-call")) for m in backend.metadata[start:]))


async def test_retries_make_the_attempts_and_end_with_the_status_grpcio_does(
    plane: ControlPlane,
) -> None:
    """``retry_on`` unavailable and cancelled with 9 retries (capped at 5 attempts) and with
    1: each call makes as many attempts as on grpcio's channel and ends with the same code and
    details (a code not listed is not retried, a success takes one attempt)."""
    async with echo_backends("echo") as (backend,):
        plane.set_all(
            [*_retrying("retry", 9), *_retrying("retry-once", 1), *cluster_of("echo", [backend])]
        )
        grpc_results = await theirs(plane, RETRY_CALLS, node_id="retry-grpc")
        grpc_attempts = _attempts(backend, 0)
        start = len(backend.metadata)
        our_results = await ours(plane, RETRY_CALLS, node_id="retry-ours")
        our_attempts = _attempts(backend, start)
    assert grpc_attempts == {"1": 5, "2": 5, "3": 1, "4": 1, "5": 2}
    assert our_attempts == grpc_attempts
    assert [(r.code, r.details) for r in our_results] == [(r.code, r.details) for r in grpc_results]
    assert grpc_results[3].reply == "echo:ok"


#: The ``half`` route's delay: far above what an undelayed call takes even on a loaded machine
#: (milliseconds; tens of them at worst), so a call is classed delayed by taking at least half
#: of it with a wide margin either side. Its calls are made together, so it costs one delay.
HALF_DELAY = 1.0


def _faulty(backend: EchoBackend) -> list[Any]:
    """Listener ``faults`` with an empty fault filter, and routes (by header ``x-f``) that
    override it: ``abort`` UNAVAILABLE at 30%, ``delay`` 100 ms always, ``half`` `HALF_DELAY`
    at 50%; ``msd``: a route whose ``max_stream_duration`` is 200 ms."""
    routes = route_pb2.RouteConfiguration(name="faults-routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=["faults"])
    overrides = {
        "abort": fault(abort_grpc=14, abort_percent=(30, 0)),
        "delay": fault(delay_s=0.1, delay_percent=(100, 0)),
        "half": fault(delay_s=HALF_DELAY, delay_percent=(50, 0)),
    }
    for name, config in overrides.items():
        route = add_route(vhost, "", "echo")
        route.match.headers.add(name="x-f").string_match.exact = name
        route.typed_per_filter_config["fault0"].Pack(override(config))
    route = add_route(vhost, "", "echo")
    route.match.headers.add(name="x-f").string_match.exact = "msd"
    route.route.max_stream_duration.max_stream_duration.FromMilliseconds(200)
    add_route(vhost, "", "echo")
    return [
        listener(name="faults", rds=routes.name, faults=(fault(),)),
        routes,
        *cluster_of("echo", [backend]),
    ]


def _calls(kind: str, count: int, value: str = "hi", *, together: bool = False) -> list[Call]:
    call = Call(listener="faults", value=value, metadata=(("x-f", kind),), together=together)
    return [call] * count


def _within(count: int, calls: int, share: float) -> bool:
    """Whether ``count`` of ``calls`` is within four standard deviations of ``share``."""
    bound: float = 4 * (calls * share * (1 - share)) ** 0.5
    return abs(count - calls * share) <= bound


async def test_fault_aborts_delays_and_max_stream_duration_match_grpcio(
    plane: ControlPlane,
) -> None:
    """A 30% abort (UNAVAILABLE) aborts about 30% of 200 calls on each channel, with grpcio's
    code and details; a 100 ms delay delays every call by at least that; a 1 s delay at 50%
    about half of 40 calls made at once; a route's 200 ms ``max_stream_duration`` ends a call
    the backend holds with grpcio's DEADLINE_EXCEEDED, after 200 ms as gRFC A31 says (grpcio
    ends it sooner: at once when the duration is 1 s or less, 1.5 s early for 2 s), and a call
    the backend answers at once goes through (grpcio fails it too)."""
    async with echo_backends("echo") as (backend,):
        plane.set_all(_faulty(backend))
        calls = [
            *_calls("abort", 200),
            *_calls("delay", 3),
            *_calls("half", 40, together=True),
            *_calls("msd", 2, value="hold"),
            *_calls("msd", 1),
        ]
        theirs_, ours_ = await both(plane, calls, node="faults")
    for side in (theirs_, ours_):
        aborts = side[:200]
        failed = [r for r in aborts if r.code != "OK"]
        assert _within(len(failed), 200, 0.3), len(failed)
        assert {(r.code, r.details) for r in failed} == {_aborted(theirs_)}
        assert all(0.1 <= r.seconds < 2.0 and r.code == "OK" for r in side[200:203]), side
        assert all(r.code == "OK" for r in side[203:243]), side[203:243]
        delayed = [r for r in side[203:243] if r.seconds >= HALF_DELAY / 2]
        assert _within(len(delayed), 40, 0.5), len(delayed)
        assert all(r.seconds >= HALF_DELAY for r in delayed), delayed
    held = slice(243, 245)
    assert [(r.code, r.details) for r in ours_[held]] == [
        (r.code, r.details) for r in theirs_[held]
    ]
    assert theirs_[243].code == "DEADLINE_EXCEEDED"
    # grpcio ends them no later than A31's time, ours at it (upper bounds leave room for a busy CI)
    assert all(r.seconds < 0.2 + 0.5 + 1.0 for r in theirs_[held]), theirs_[held]
    assert all(0.2 <= r.seconds < 3.0 for r in ours_[held]), ours_[held]
    assert ours_[245].reply == "echo:hi"


def _aborted(results: list[Result]) -> tuple[str, str]:
    """The code and details of grpcio's first aborted call."""
    return next((r.code, r.details) for r in results if r.code != "OK")
