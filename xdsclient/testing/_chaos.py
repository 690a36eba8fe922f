"""Chaos: random faults while the server mutates resources; then convergence is checked.

Why here: the test suite runs it briefly for every transport variant and ``bench/chaos.py``
runs it for minutes; both need the same driver and the same verdict. The faults are the control
plane's own (close streams, restart, stop answering for a while); the mutations replace random
endpoint assignments with new, unique contents, so every update a watcher receives can be traced
to the one the server sent.

The verdict on what a watcher received, update by update (`_violations`):
- every update is one the server made (no invented contents);
- no update is delivered twice in a row;
- a watcher never goes back to a version it has already passed (an older one, or the one it
  has now again after an older one) unless a server sent it: a response carrying that version
  of that resource reached the client after the response that moved the watcher past it (the
  last one carrying the version it had before, received before that was delivered). With a
  fallback server
  (gRFC A71) this happens legitimately: the primary's first response after an outage may be
  older than what the fallback delivered meanwhile, and the primary serves the authority again
  from that response on (gRPC C-core does the same). A step back that no response explains is
  the client's own doing, and a violation.
The client's responses are read through an observer (`XdsClient.add_observer`); the order of
responses and deliveries is one counter, since both happen on the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import random
import time
from typing import Any

import attrs
from envoy.config.endpoint.v3 import endpoint_pb2

from .._names import RESOURCE_WRAPPER_TYPE_URL
from .._observe._events import ProtocolEvent, ResponseReceived
from .._protocol import Event, ResourceChanged
from .._protocol._messages import Resource
from .._settings._config import Backoff
from .._settings._options import ClientOptions
from .._watch._watchers import CallbackWatcher
from ..resources import ENDPOINT
from ._bootstraps import bootstrap
from ._control_plane import ControlPlane

__all__ = ["ChaosReport", "run_chaos"]


@attrs.frozen(kw_only=True)
class ChaosReport:
    """What happened, and whether the client came out right."""

    seconds: float
    faults: dict[str, int]
    updates_sent: int
    updates_received: int
    #: seconds from the end of the faults until the cache equalled the server's state (None: never)
    convergence: float | None
    #: updates a watcher received that the server never sent, or out of order (must be empty)
    violations: tuple[str, ...]
    #: updates that went back to an older version because a server sent it (allowed: a primary
    #: answering again with a response older than what the fallback delivered meanwhile)
    steps_back: int = 0

    @property
    def ok(self) -> bool:
        return self.convergence is not None and not self.violations


def _assignment(name: str, serial: int) -> Any:
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
    group = message.endpoints.add()
    group.load_balancing_weight.value = 1
    group.locality.region = "chaos"
    lb = group.lb_endpoints.add()
    lb.endpoint.address.socket_address.address = (
        f"10.{serial // 65536 % 256}.{serial // 256 % 256}.{serial % 256}"
    )
    lb.endpoint.address.socket_address.port_value = 1 + serial % 60000
    return message


async def run_chaos(
    *,
    seconds: float,
    seed: int = 0,
    resources: int = 5,
    ads: bool = True,
    delta: bool = False,
    settle_timeout: float = 15.0,
    servers: int = 1,
) -> ChaosReport:
    """Mutate ``resources`` endpoint assignments under random faults for ``seconds``.

    With ``servers=2`` a fallback server (gRFC A71) mirrors the primary, faults hit either, and
    one more fault takes the primary down while the client starts watching a new resource (so
    the client falls back, and goes back when the primary returns).
    """
    from .._client import XdsClient

    rng = random.Random(seed)
    names = [f"svc-{i}" for i in range(resources)]
    sent: dict[str, list[bytes]] = {name: [] for name in names}
    #: name -> (step, contents) of each update a watcher received
    received: dict[str, list[tuple[int, bytes]]] = collections.defaultdict(list)
    #: (name, contents) -> the steps at which a response carrying it reached the client
    arrived: dict[tuple[str, bytes], list[int]] = collections.defaultdict(list)
    faults: collections.Counter[str] = collections.Counter()
    serial = 0
    steps = itertools.count()

    def record(event: Event) -> None:
        if isinstance(event, ResourceChanged):
            received[event.name].append((next(steps), event.value.raw))

    def observe(event: ProtocolEvent) -> None:
        if type(event) is ResponseReceived and event.type_url == ENDPOINT.type_url:
            step = next(steps)
            for name, raw in _assignments(event.message, event.delta):
                arrived[name, raw].append(step)

    async with contextlib.AsyncExitStack() as stack:
        planes = [await stack.enter_async_context(ControlPlane()) for _ in range(servers)]

        def mutate(name: str) -> None:
            nonlocal serial
            serial += 1
            message = _assignment(name, serial)
            sent.setdefault(name, []).append(message.SerializeToString())
            for plane in planes:
                plane.set(message)

        for name in names:
            mutate(name)
        client = await stack.enter_async_context(
            XdsClient(
                bootstrap=bootstrap(planes, node_id=f"chaos-{seed}"),
                ads=ads,
                delta=delta,
                options=ClientOptions(
                    does_not_exist_timeout=2.0, backoff=Backoff(initial=0.02, maximum=0.2)
                ),
            )
        )
        client.add_observer(observe, verdicts=False)
        for name in names:
            client.add_watcher(ENDPOINT, name, CallbackWatcher(record))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            roll = rng.random()
            plane = rng.choice(planes)
            if roll < 0.65:
                mutate(rng.choice(names))
            elif roll < 0.75:
                faults["close streams"] += 1
                plane.close_streams()
            elif roll < 0.85:
                faults["restart"] += 1
                await plane.restart()
            elif roll < 0.95 or servers == 1:
                faults["stop answering"] += 1
                plane.pause()
                await asyncio.sleep(rng.uniform(0.05, 0.3))
                plane.resume()
            else:
                faults["primary down, new watch"] += 1
                name = f"svc-{len(names)}"
                names.append(name)
                mutate(name)
                await planes[0].stop(keep_port=True)
                client.add_watcher(ENDPOINT, name, CallbackWatcher(record))
                await asyncio.sleep(rng.uniform(0.1, 0.4))
                await planes[0].start()
            await asyncio.sleep(rng.uniform(0.0, 0.05))
        for plane in planes:
            plane.resume()
        settled = time.monotonic()
        convergence = None
        while time.monotonic() - settled < settle_timeout:
            if all(_holds(client, name, sent[name][-1]) for name in names):
                convergence = time.monotonic() - settled
                break
            await asyncio.sleep(0.01)
    violations: list[str] = []
    steps_back = 0
    for name, got in received.items():
        found, back = _violations(name, got, sent[name], arrived)
        violations.extend(found)
        steps_back += back
    return ChaosReport(
        seconds=seconds,
        faults=dict(faults),
        updates_sent=sum(len(v) for v in sent.values()),
        updates_received=sum(len(v) for v in received.values()),
        convergence=convergence,
        violations=tuple(violations),
        steps_back=steps_back,
    )


def _violations(
    name: str,
    got: list[tuple[int, bytes]],
    sent: list[bytes],
    arrived: dict[tuple[str, bytes], list[int]],
) -> tuple[list[str], int]:
    """What is wrong with the updates one watcher received (see the module's docstring), and
    how many times it went back to an older version because a server sent it."""
    order = {raw: i for i, raw in enumerate(sent)}
    violations = []
    steps_back = 0
    positions: list[int] = []
    newest = -1  # the newest version delivered
    cause = -1  # when the response carrying the version delivered last reached the client
    for step, raw in got:
        position = order.get(raw)
        if position is None:
            violations.append(f"{name}: received an update the server never sent")
            continue
        if positions and position == positions[-1]:
            violations.append(f"{name}: the same update delivered twice in a row: {position}")
        elif position <= newest:
            if any(cause < s < step for s in arrived[name, raw]):
                steps_back += 1
            else:
                history = [*positions[-4:], position]
                violations.append(f"{name}: went back to a version no server sent again: {history}")
        if position >= newest:
            newest = position
        cause = max((s for s in arrived[name, raw] if s < step), default=step)
        positions.append(position)
    return violations, steps_back


def _assignments(response: Any, delta: bool) -> list[tuple[str, bytes]]:
    """(name, serialized assignment) of each endpoint assignment a response carries."""
    result = []
    for item in response.resources:
        if delta:
            packed = item.resource if item.HasField("resource") else None
        elif item.type_url == RESOURCE_WRAPPER_TYPE_URL:
            wrapper = Resource.FromString(item.value)
            packed = wrapper.resource if wrapper.HasField("resource") else None
        else:
            packed = item
        if packed is not None:
            message = endpoint_pb2.ClusterLoadAssignment.FromString(packed.value)
            result.append((message.cluster_name, message.SerializeToString()))
    return result


def _holds(client: Any, name: str, raw: bytes) -> bool:
    state = client.resource_state(ENDPOINT, name)
    return state is not None and state.status.holds_value and state.value.raw == raw
