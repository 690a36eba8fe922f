"""The asyncio shell of the call path every front end shares: the picker, the waiting, the
load reporters, and the client's lifecycle under one front end.

Why one class under the front ends: the config watch's callback, the connections' connectivity
reports and the calls all read and write the same few things (the snapshot the picker follows,
the load reporters, an event replaced at every change); keeping them here keeps each decision in
one place for the gRPC channel and the HTTP transport alike. Each decision is synchronous (a
snapshot is applied, a pick is made, in one step); only waiting is asynchronous, on the event
(a queued pick picks again after each change, gRPC's queued-pick rule).

The pick rules (`pick_now`, then `wait_pick` while it says `PickWait`): a COMPLETE pick or a
drop answers at once; a failed pick fails at once unless the call is ``wait_for_ready``; a
queued pick (and a failed one that waits) waits for the next change or the picker's next timer,
never past the call's deadline (then `DEADLINE`); a pick after `begin_close` gets the front
end's `closed_status`. The picker runs once per chance to pick.

Connections the picker wants (round robin wants every endpoint) are opened by one pass over
them per turn of the loop, however many connectivity reports asked for it in that turn (a walk
per report is quadratic at thousands of endpoints), and a pass opens at most `OPENS_PER_TURN`
new connections (the rest at the next turns): a call picks as soon as one endpoint is READY
while the others still open. A new snapshot gets its first pass at once.

A front end subclasses `PlaneCore`, gives it its ``security`` (each cluster's TLS policy:
`ClusterSecurity`) and ``connections`` (`HeldConnections`), and fills its hooks: how it watches
its configuration (`_watch_configs`, `_cancel_watches`), connects to an endpoint (`_connect`, and
`_open` in the connection pass) and words an endpoint-level failure (`_unreachable`). Holding the
connections a snapshot's clusters name under their TLS policies (`_hold`), refusing a cluster
whose TLS cannot be set up (`_refused`) and closing the connections (`_close_connections`) are
the same for every front end: done here from those two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from .. import ClusterLoad, XdsClient, XdsConfig, XdsError
from .._call import Code, Status
from ..lb import (
    ComposedPicker,
    ConnectivityState,
    EndpointKey,
    OutlierMode,
    PickOutcome,
    PickResult,
    key_of,
)
from ._failures import empty_assignment, resource_details
from ._tls_policy import ClusterSecurity, TlsPolicy

__all__ = ["DEADLINE", "OPENS_PER_TURN", "HeldConnections", "PickWait", "PlaneCore"]

logger = logging.getLogger("xdsclient.plane")

#: The status of a call whose deadline passed while it waited (gRPC's details).
DEADLINE = Status(code=Code.DEADLINE_EXCEEDED, details="Deadline Exceeded")
_COMPLETE = PickOutcome.COMPLETE
_QUEUE = PickOutcome.QUEUE
_FAIL = PickOutcome.FAIL
#: the new connections one pass of `PlaneCore._connect_wanted` opens in a turn of the loop
OPENS_PER_TURN = 64
A = TypeVar("A")
_UNKNOWN = object()


class PickWait:
    """A pick that must wait: for ``event`` (the next change) or until ``until`` (the call's
    deadline or the picker's next timer, None: no bound); then `PlaneCore.wait_pick` picks
    again with the same arguments."""

    __slots__ = ("args", "event", "until")

    def __init__(
        self,
        event: asyncio.Event,
        until: float | None,
        args: tuple[str, Mapping[str, str], int | None, float | None, bool],
    ) -> None:
        self.event = event
        self.until = until
        self.args = args


class HeldConnections(Protocol):
    """A front end's connections as the plane holds and closes them."""

    def hold_only(self, slots: Iterable[tuple[EndpointKey, TlsPolicy | None]]) -> None:
        """The current snapshot holds exactly ``slots`` (endpoint, TLS policy or None):
        release the others (each closes once its calls end)."""

    async def close(self) -> None:
        """Close every connection now."""


class PlaneCore:
    """What every call of one front end shares (see the module's docstring)."""

    #: each cluster's TLS policy and the bootstrap's certificates (set by the front end)
    security: ClusterSecurity
    #: the front end's connections (set by the front end)
    connections: HeldConnections

    #: what a pick or a wait returns once the front end closed (front ends give their words)
    closed_status = Status(code=Code.CANCELLED, details="closed")
    #: whose outlier detection rules the picker follows (gRPC's A50; HTTP: Envoy's)
    outlier_mode: OutlierMode = "grpc"

    def __init__(
        self,
        client: XdsClient,
        *,
        owns_client: bool,
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
        channel_id: int | None = None,
    ) -> None:
        if not isinstance(client, XdsClient):
            raise TypeError(f"client must be an XdsClient, not {client!r}")
        self.client = client
        self.rng = rng
        self.clock = clock
        #: gRFC A42's ``channel_id``: one random 64-bit value per channel (or transport)
        self.channel_id = rng.getrandbits(64) if channel_id is None else channel_id
        self.picker = ComposedPicker(channel_id=self.channel_id, outlier_mode=self.outlier_mode)
        #: the snapshot the picker follows (None before the first)
        self.snapshot: XdsConfig | None = None
        self.closed = False
        self._owns_client = owns_client
        self._changed = asyncio.Event()
        self._start: asyncio.Task[None] | None = None
        #: each leaf cluster's load reporter, None for one that reports no load (this snapshot's)
        self._loads: dict[str, ClusterLoad | None] = {}
        self._node_id = client.config.node.id
        #: the pass of `_connect_wanted` due at the next turn of the loop
        self._connecting: asyncio.Handle | None = None

    # --- hooks ---

    def _watch_configs(self) -> None:
        """Start watching the front end's configuration (raises when it cannot)."""
        raise NotImplementedError

    def _start_failed(self, error: Exception) -> None:
        """`_watch_configs` raised ``error`` (nothing was added to the client)."""

    def _cancel_watches(self) -> None:
        """Stop every configuration watch."""

    def _connect(self, key: EndpointKey) -> None:
        """Connect to ``key`` ahead of a call (or mark it failing when it cannot be)."""
        raise NotImplementedError

    def _open(self, key: EndpointKey) -> bool:
        """The connection pass's step for a wanted ``key``: connect when it needs it; True
        when that started a new connection (counted against `OPENS_PER_TURN`)."""
        self._connect(key)
        return False

    def _hold(self, snapshot: XdsConfig | None) -> None:
        """Keep the connections ``snapshot`` holds (None: none), release the others."""
        if snapshot is None:
            self.connections.hold_only(())
        else:
            self.connections.hold_only(self.security.update(snapshot.clusters))

    async def _close_connections(self) -> None:
        """Close every connection."""
        await self.connections.close()

    def _refused(self, cluster: str) -> str | None:
        """Why no call may go to ``cluster`` (its TLS refused), None when it may."""
        return self.security.invalid(cluster)

    def _unreachable(self, cluster: str) -> str | None:
        """The words for a cluster whose every endpoint fails, None to use the picker's."""
        return None

    # --- lifecycle ---

    def started(self) -> bool:
        """Whether `start` ran."""
        return self._start is not None

    def kick(self) -> None:
        """Start watching the configuration, once."""
        if self._start is None:
            self._start = asyncio.ensure_future(self._begin())

    async def start(self) -> None:
        """`kick`, and wait until the watch is in place (or failed)."""
        self.kick()
        assert self._start is not None
        await asyncio.shield(self._start)

    async def _begin(self) -> None:
        try:
            if self._owns_client:
                await self.client.start()
            self._watch_configs()
        except (XdsError, ValueError, RuntimeError) as error:
            self._start_failed(error)
            self.notify()

    def begin_close(self) -> None:
        """Refuse new picks: stop watching and wake every waiting call (they fail)."""
        if self.closed:
            return
        self.closed = True
        self._cancel_watches()
        if self._connecting is not None:
            self._connecting.cancel()
            self._connecting = None
        self.notify()

    async def close(self) -> None:
        """`begin_close`, then close the connections and the client this front end made."""
        self.begin_close()
        if self._start is not None:
            await asyncio.gather(self._start, return_exceptions=True)
            self._cancel_watches()
        await self._close_connections()
        if self._owns_client:
            await self.client.close()

    # --- waiting ---

    def changed(self) -> asyncio.Event:
        """The event the next change sets."""
        return self._changed

    async def wait_change(self, event: asyncio.Event, until: float | None) -> None:
        """Wait for ``event`` (a change) or until ``until`` on `clock`."""
        if until is None:
            await event.wait()
            return
        timeout = until - self.clock()
        if timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def notify(self) -> None:
        """Something changed: wake every waiting call."""
        self._changed.set()
        self._changed = asyncio.Event()

    # --- picks ---

    def pick_now(
        self,
        cluster: str,
        headers: Mapping[str, str],
        request_hash: int | None,
        deadline: float | None = None,
        wait_for_ready: bool = False,
    ) -> PickResult | Status | PickWait:
        """A pick in ``cluster`` now: COMPLETE or DROP, the status that fails the call, or
        `PickWait` when it must wait (see the module's docstring)."""
        if self.closed:
            return self.closed_status
        event = self._changed
        now = self.clock()
        refused = self._refused(cluster)
        if refused is not None:
            return Status(
                code=Code.UNAVAILABLE,
                details=f"CDS resource {cluster}: invalid resource: {refused} "
                f"(node ID:{self._node_id})",
            )
        picker = self.picker
        timer = picker.next_deadline()
        if timer is not None and timer <= now:
            picker.poll(self.rng, now)
            timer = picker.next_deadline()
        result = picker.pick_in(cluster, headers, self.rng, now, request_hash=request_hash)
        for endpoint in result.connect:
            self._connect(key_of(endpoint))
        outcome = result.outcome
        if outcome is _COMPLETE:
            return result
        if outcome is _FAIL and not wait_for_ready:
            return self.failure(cluster, result)
        if outcome is not _QUEUE and outcome is not _FAIL:
            return result  # a drop fails even a wait-for-ready call
        if deadline is not None and now >= deadline:
            return DEADLINE
        self._connect_wanted()
        until = deadline if timer is None else min(timer, deadline or timer)
        return PickWait(event, until, (cluster, headers, request_hash, deadline, wait_for_ready))

    async def wait_pick(self, wait: PickWait) -> PickResult | Status:
        """Wait as ``wait`` says, then pick again, until the pick has an answer."""
        while True:
            await self.wait_change(wait.event, wait.until)
            picked = self.pick_now(*wait.args)
            if not isinstance(picked, PickWait):
                return picked
            wait = picked

    async def pick(
        self,
        cluster: str,
        headers: Mapping[str, str],
        request_hash: int | None,
        deadline: float | None = None,
        wait_for_ready: bool = False,
    ) -> PickResult | Status:
        """`pick_now`, waiting while it says `PickWait`."""
        picked = self.pick_now(cluster, headers, request_hash, deadline, wait_for_ready)
        if isinstance(picked, PickWait):
            return await self.wait_pick(picked)
        return picked

    def failure(self, cluster: str, result: PickResult) -> Status:
        """The status of a failed pick: C-core's for a cluster or assignment the snapshot could
        not resolve (``CDS resource <name>: does not exist (node ID:<id>)``) and for a cluster
        with no endpoints, the front end's for one whose every endpoint fails, else the
        picker's reason."""
        snapshot = self.snapshot
        entry = snapshot.clusters.get(cluster) if snapshot is not None else None
        error = None if entry is None else (entry.error or entry.endpoints_error)
        if error is not None:
            details = resource_details(error, self._node_id)
        elif (empty := empty_assignment(entry)) is not None:
            details = empty
        elif (failed := self._unreachable(cluster)) is not None:
            details = failed
        else:
            details = result.error or f"cluster {cluster}: no endpoint is reachable"
        return Status(code=Code.UNAVAILABLE, details=details)

    # --- load reporting ---

    def load_of(self, cluster: str) -> ClusterLoad | None:
        """The load reporter of leaf ``cluster`` when it reports load (``lrs_server``); the
        answer is kept until the next snapshot, a None too (the usual cluster reports none)."""
        load = self._loads.get(cluster, _UNKNOWN)
        if load is not _UNKNOWN:
            return load  # type: ignore[return-value]
        snapshot = self.snapshot
        entry = snapshot.clusters.get(cluster) if snapshot is not None else None
        if entry is None or entry.cluster is None or not entry.cluster.lrs_server_self:
            if snapshot is not None:
                self._loads[cluster] = None
            return None
        try:
            load = self._loads[cluster] = self.client.load_reporter(entry.cluster)
        except XdsError:  # the client closed
            return None
        return load

    # --- inputs ---

    def use_snapshot(self, snapshot: XdsConfig) -> None:
        """Balance by ``snapshot`` from now on: the picker follows it, the connections it
        holds are kept (the others released), and those the picker wants are opened."""
        self.snapshot = snapshot
        self.picker.update(snapshot, self.clock())
        self._loads = {}  # the client gives the same load again per (cluster, service)
        self._hold(snapshot)
        self._open_wanted()  # the first connections at once, the rest over the next turns

    def drop_snapshot(self) -> None:
        """No snapshot any more: the connections are released (calls on them finish)."""
        self.snapshot = None
        self._hold(None)

    def _connect_wanted(self) -> None:
        """Open the connections the picker wants, in one pass at the next turn of the loop
        however many reports ask for it (see the module's docstring)."""
        if self._connecting is None and not self.closed:
            self._connecting = asyncio.get_running_loop().call_soon(self._open_wanted)

    def _open_wanted(self) -> None:
        """The connection pass: `_open` each wanted endpoint, at most `OPENS_PER_TURN` new
        connections, the rest by another pass at the next turn."""
        if self._connecting is not None:
            self._connecting.cancel()
            self._connecting = None
        if self.closed:
            return
        opened = 0
        for endpoint in self.picker.wanted_connections():
            if self._open(key_of(endpoint)):
                opened += 1
                if opened == OPENS_PER_TURN:
                    self._connect_wanted()
                    return

    def on_connectivity(self, key: EndpointKey, state: ConnectivityState) -> None:
        """A connection reports ``key``'s connectivity: the picker learns it, calls wake."""
        self.picker.set_endpoint_state(key, state, self.clock())
        self._connect_wanted()
        self.notify()

    async def wait_for(
        self, answer: Callable[[], A | Status | None], deadline: float | None
    ) -> A | Status:
        """``answer()`` once it is not None, asked again after each change; `closed_status`
        once closed, `DEADLINE` once ``deadline`` passed."""
        while True:
            if self.closed:
                return self.closed_status
            found = answer()
            if found is not None:
                return found
            if deadline is not None and self.clock() >= deadline:
                return DEADLINE
            await self.wait_change(self._changed, deadline)
