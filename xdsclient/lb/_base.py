"""The contract every load-balancing building block keeps: states in, picks out, time passed in.

Why a contract of its own: the blocks (endpoint pickers, the per-priority child, priority
failover, drops, the composed picker) are written and tested separately, and a user may swap
any of them. gRPC's balancers are a tree of policies, each told its children's connectivity and
handing a picker up; here every block is a plain synchronous object, sans-I/O like the protocol
core:
- the user's transport reports each endpoint's connectivity in (`set_endpoint_state`); a block
  never opens a connection, it *asks* for one (`PickResult.connect`, `wanted_connections`);
- time and randomness are arguments (`now`, a `random.Random`), so a test replays a run exactly;
- an update with a new assignment keeps what it can (states, weights, ejections) by endpoint
  key, as gRPC keeps subchannels by address.
"""

from __future__ import annotations

import enum
import operator
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, Protocol

import attrs

from ..resources import Endpoint, LocalityEndpoints

__all__ = [
    "CallEnd",
    "ChildPolicy",
    "ConnectivityState",
    "EndpointKey",
    "EndpointPicker",
    "Headers",
    "LocalFailure",
    "OutlierMode",
    "PickOutcome",
    "PickRequest",
    "PickResult",
    "aggregate_state",
    "header_map",
    "key_of",
]

#: An endpoint's identity across updates: its first (address, port), as gRPC keys subchannels.
EndpointKey = tuple[str, int]


def key_of(endpoint: Endpoint) -> EndpointKey:
    """The key an endpoint keeps across assignments."""
    return (endpoint.address, endpoint.port)


#: `key_of` at C speed, for whole lists (``list(map(keys_of, endpoints))``)
keys_of: Callable[[Endpoint], EndpointKey] = operator.itemgetter(0, 1)


class ConnectivityState(enum.Enum):
    """gRPC's connectivity states (``grpc_connectivity_state``), of an endpoint or a block."""

    IDLE = "IDLE"
    CONNECTING = "CONNECTING"
    READY = "READY"
    TRANSIENT_FAILURE = "TRANSIENT_FAILURE"


def aggregate_state(states: Iterable[ConnectivityState]) -> ConnectivityState:
    """gRPC's aggregation rule (round_robin, weighted_target): READY if any is READY, else
    CONNECTING if any is, else IDLE if any is, else TRANSIENT_FAILURE (also for none)."""
    seen = set(states)
    for state in (
        ConnectivityState.READY,
        ConnectivityState.CONNECTING,
        ConnectivityState.IDLE,
    ):
        if state in seen:
            return state
    return ConnectivityState.TRANSIENT_FAILURE


#: A call's headers: a mapping of lower-case name to value (a repeated header's values already
#: joined with ``,``), or gRPC metadata's shape, a sequence of (name, value) pairs in which a
#: name may repeat (a binary ``-bin`` value may be bytes, as grpc.aio gives it).
Headers = Mapping[str, str] | Sequence[tuple[str, str | bytes]]


def header_map(headers: Headers) -> Mapping[str, str]:
    """The headers as routing and hashing read them: a mapping as it is; (name, value) pairs
    with lower-case names, a repeated name's values joined with ``,`` in order (as gRPC joins
    them to match and hash), and binary headers (names ending in ``-bin``, or any value given
    as bytes) left out, as gRPC neither matches nor hashes them."""
    kind = type(headers)
    # dict, a read-only view of one, tuple and list first: an ABC's isinstance costs several
    # Python calls
    if (
        kind is dict
        or kind is MappingProxyType
        or (kind is not tuple and kind is not list and isinstance(headers, Mapping))
    ):
        return headers  # type: ignore[return-value]
    pairs: Sequence[tuple[str, str | bytes]] = headers  # type: ignore[assignment]
    joined: dict[str, str] = {}
    for name, value in pairs:
        name = name.lower()
        if name.endswith("-bin") or not isinstance(value, str):
            continue
        before = joined.get(name)
        joined[name] = value if before is None else f"{before},{value}"
    return joined


@attrs.frozen(kw_only=True)
class PickRequest:
    """What a pick may look at: the call's headers (`Headers`: a mapping with lower-case names,
    or (name, value) pairs, which are joined by `header_map`) and the request hash computed
    from the route's hash policies (ring hash; None when the route has none)."""

    headers: Mapping[str, str] = attrs.field(factory=dict, converter=header_map)
    request_hash: int | None = None


class PickOutcome(enum.Enum):
    """gRPC's pick results: use an endpoint, wait for a new picker, fail the call, drop it."""

    COMPLETE = "COMPLETE"
    QUEUE = "QUEUE"
    FAIL = "FAIL"
    DROP = "DROP"


@attrs.frozen(kw_only=True)
class PickResult:
    """One pick. ``endpoint`` with COMPLETE; ``connect``: endpoints the transport should start
    connecting now (ring hash on an IDLE endpoint, pick first), with any outcome; ``cluster`` and
    ``locality`` say where the pick went (load reporting); ``drop_category`` with a DROP the
    assignment asked for (none for circuit breaking); ``error`` says why, with FAIL and DROP
    (C-core's texts: "EDS-configured drop: <category>", "circuit breaker drop" followed by
    the cluster, its calls in flight and its ``max_requests``)."""

    outcome: PickOutcome
    endpoint: Endpoint | None = None
    connect: tuple[Endpoint, ...] = ()
    cluster: str = ""
    locality: LocalityEndpoints | None = None
    drop_category: str = ""
    error: str = ""


@attrs.frozen(kw_only=True)
class CallEnd:
    """How a call picked on an endpoint ended, for the optional ``call_ended(key, end)`` hook
    of a policy: ``ok``, the seconds from its start on the endpoint to its end (``elapsed``),
    when it ended on the picker's clock (``now``), and the backend's per-call ORCA load report
    (``xds.data.orca.v3.OrcaLoadReport`` from the ``endpoint-load-metrics-bin`` trailer, gRFC
    A51; None when the backend sent none)."""

    ok: bool
    elapsed: float = 0.0
    now: float = 0.0
    load_report: Any = None


class LocalFailure(enum.Enum):
    """How a call failed without an answer from the upstream (Envoy's local-origin errors):
    the connection could not be made (refused, TLS, connect timeout), the stream was reset
    after connecting, or the route's timeout passed. Envoy's outlier detection counts them
    as 503, 503 and 504, or apart with ``split_external_local_origin_errors``."""

    CONNECT = "CONNECT"
    RESET = "RESET"
    TIMEOUT = "TIMEOUT"


#: Which outlier detection rules a composed picker follows: ``"grpc"``, gRFC A50 (success rate
#: and failure percentage by ``ok``, as C-core); ``"envoy"``, Envoy's (also consecutive 5xx,
#: gateway and local-origin failures, counted from the HTTP status and `LocalFailure`).
OutlierMode = Literal["grpc", "envoy"]


class EndpointPicker(Protocol):
    """Picks among one locality's endpoints (gRPC: round_robin, weighted_round_robin,
    least_request, pick_first under weighted_target)."""

    def update(self, endpoints: Sequence[Endpoint], now: float) -> None:
        """A new endpoint list; state kept for endpoints whose key stays."""

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity."""

    def state(self) -> ConnectivityState:
        """This picker's aggregated state."""

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Endpoints this picker wants connected now (all of them for round robin; the first
        for pick first)."""

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """One pick."""


class ChildPolicy(Protocol):
    """Picks among the endpoints of one priority (gRPC: the priority policy's child: a
    locality-weighted target of endpoint pickers, or ring hash over all of the priority).

    A child may also have the optional call hooks ``call_started(key)``,
    ``call_finished(key, ok)`` and ``call_ended(key, end)`` (a `CallEnd`: outcome, latency
    and the backend's per-call ORCA load report), and ``load_report(key, report, now)`` (an
    out-of-band ORCA report): the composed picker calls them, when present, as a call it
    picked starts and ends and as reports arrive (`WeightedTarget` passes them to its
    locality pickers: least request counts calls, weighted round robin takes its weights
    from the ORCA reports)."""

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        """The priority's localities; state kept by locality and endpoint key."""

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity."""

    def state(self) -> ConnectivityState:
        """This child's aggregated state."""

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Endpoints this child wants connected now."""

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """One pick."""
