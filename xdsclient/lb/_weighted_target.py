"""The locality-weighted child of one priority (gRPC's ``weighted_target`` as xDS uses it).

Why as gRPC does it: gRPC's xds_wrr_locality hands each locality to a weighted_target child
with the locality's weight, and weighted_target's picker is a random weighted choice among the
READY children only (C-core ``weighted_target.cc``): a uniform draw in [0, sum of READY weights)
and the first child whose running sum exceeds it. Zero-weight localities are left out entirely
(neither picked nor counted in the state). The state, over the weighted children: READY if any
is READY, else CONNECTING if any is (picks queue), else IDLE if any is (picks queue and ask the
IDLE children to leave IDLE), else TRANSIENT_FAILURE (a weighted choice among the failed
children, whose pick fails with its own error).

Each locality gets its own `EndpointPicker` from the factory (round robin, least request, ...),
kept across updates by locality name, as weighted_target keeps children by name. The call
hooks (`call_started`, `call_finished`, `call_ended`) go to the locality's picker when it has
them, so least request counts the calls a composed picker starts and ends and weighted round
robin reads their ORCA load reports.

Cost: a connectivity change is one locality's; the READY choice is rebuilt only when a
locality's aggregated state changed. An update whose locality is the same object as before (the
priority policy hands unchanged localities on as they were) keeps that locality's keys and
results; the endpoint index is rebuilt only when some locality changed.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

from .. import Locality
from ..resources import Endpoint, LocalityEndpoints
from ._base import (
    CallEnd,
    ConnectivityState,
    EndpointKey,
    EndpointPicker,
    PickOutcome,
    PickRequest,
    PickResult,
    keys_of,
)
from ._round_robin import FlatRoundRobin, RoundRobinPicker

__all__ = ["WeightedTarget"]

_READY = ConnectivityState.READY
_CONNECTING = ConnectivityState.CONNECTING
_IDLE = ConnectivityState.IDLE
_FAILED = ConnectivityState.TRANSIENT_FAILURE
_COMPLETE = PickOutcome.COMPLETE


class _Child:
    """One locality's picker; ``started``/``finished`` are its call hooks, None when it has
    none (only least request counts calls)."""

    __slots__ = (
        "ended",
        "finished",
        "keys",
        "locality",
        "picker",
        "reported",
        "results",
        "started",
    )

    def __init__(self, locality: LocalityEndpoints, picker: EndpointPicker) -> None:
        self.locality = locality
        #: the keys of ``locality``'s endpoints, in order
        self.keys: list[EndpointKey] = list(map(keys_of, locality.endpoints))
        self.picker = picker
        #: this locality's COMPLETE results (with cluster and locality) by id of the endpoint
        #: object, each holding its endpoint (so the id stays its own); cleared on update
        self.results: dict[int, PickResult] = {}
        self.started: Callable[[EndpointKey], None] | None = getattr(picker, "call_started", None)
        self.finished: Callable[[EndpointKey, bool], None] | None = getattr(
            picker, "call_finished", None
        )
        self.ended: Callable[[EndpointKey, CallEnd], None] | None = getattr(
            picker, "call_ended", None
        )
        self.reported: Callable[[EndpointKey, Any, float], None] | None = getattr(
            picker, "load_report", None
        )


class WeightedTarget:
    """A `ChildPolicy`: a random locality by weight among the READY ones, then that
    locality's `EndpointPicker`. ``cluster`` is copied into every pick result."""

    def __init__(
        self,
        picker_factory: Callable[[], EndpointPicker],
        *,
        cluster: str = "",
        reads_reports: bool = True,
        counts_calls: bool = True,
    ) -> None:
        self._factory = picker_factory
        self._cluster = cluster
        self._children: dict[Locality, _Child] = {}
        self._by_endpoint: dict[EndpointKey, _Child] = {}
        #: the reported state of each key of the index
        self._states: dict[EndpointKey, ConnectivityState] = {}
        #: how many keys the localities list in all (more than the index holds: a key is in
        #: two localities)
        self._keys = 0
        #: (state, READY children, running sums of their weights); None after any change
        self._view: tuple[ConnectivityState, list[_Child], list[int]] | None = None
        # ``counts_calls=False`` and ``reads_reports=False`` (pickers without those hooks, as
        # `child_policy_for` knows) leave these out: a caller makes no call, and builds no
        # `CallEnd`, for them
        #: ``call_started(key)``: to the locality's picker (None: its pickers count no calls)
        self.call_started: Callable[[EndpointKey], None] | None = (
            self._call_started if counts_calls else None
        )
        #: ``call_finished(key, ok)``: to the locality's picker (None: as ``call_started``)
        self.call_finished: Callable[[EndpointKey, bool], None] | None = (
            self._call_finished if counts_calls else None
        )
        #: ``call_ended(key, end)``: to the locality's picker (None: its pickers lack it)
        self.call_ended: Callable[[EndpointKey, CallEnd], None] | None = (
            self._call_ended if reads_reports else None
        )
        #: ``load_report(key, report, now)``: to the locality's picker (None: they lack it)
        self.load_report: Callable[[EndpointKey, Any, float], None] | None = (
            self._load_report if reads_reports else None
        )

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        """The priority's localities; children kept by locality name, zero weights left out."""
        old = self._children
        self._children = {}
        moved: list[tuple[_Child, list[EndpointKey]]] = []  # children with new endpoints
        for locality in localities:
            if locality.weight <= 0:
                continue
            child = old.get(locality.locality)
            if child is None:
                child = _Child(locality, self._factory())
                moved.append((child, []))
            elif child.locality is not locality:
                moved.append((child, child.keys))
                child.locality = locality
                child.keys = list(map(keys_of, locality.endpoints))
                child.results = {}
            child.picker.update(locality.endpoints, now)
            self._children[locality.locality] = child
        self._tell_known(moved, now)
        if list(old.values()) != list(self._children.values()):
            self._index()
            self._states = {k: s for k, s in self._states.items() if k in self._by_endpoint}
        elif moved:
            self._reindex(moved)
            for _, old_keys in moved:
                for key in old_keys:
                    if key not in self._by_endpoint:
                        self._states.pop(key, None)
        self._view = None

    def _tell_known(self, moved: list[tuple[_Child, list[EndpointKey]]], now: float) -> None:
        """Tell each changed locality's picker the reported state of its keys new to it (an
        endpoint moving between localities stays as connected as it is, as gRPC's subchannels
        are shared by address)."""
        states = self._states
        if not states:
            return
        for child, old_keys in moved:
            before = set(old_keys)
            for key in child.keys:
                if key not in before:
                    state = states.get(key)
                    if state is not None:
                        child.picker.set_endpoint_state(key, state, now)

    def _index(self) -> None:
        """The endpoint index from scratch (a key in two localities: the later one's)."""
        by_endpoint: dict[EndpointKey, _Child] = {}
        self._by_endpoint = by_endpoint
        for child in self._children.values():
            by_endpoint.update(zip(child.keys, itertools.repeat(child)))
        self._keys = sum(len(child.keys) for child in self._children.values())

    def _reindex(self, moved: list[tuple[_Child, list[EndpointKey]]]) -> None:
        """The endpoint index told which children's keys changed (the same children in the
        same order); from scratch when a key is in two localities, as precedence then counts."""
        by_endpoint = self._by_endpoint
        if len(by_endpoint) != self._keys:
            self._index()
            return
        for child, old_keys in moved:
            for key in old_keys:
                if by_endpoint.get(key) is child:
                    del by_endpoint[key]
        for child, old_keys in moved:
            by_endpoint.update(zip(child.keys, itertools.repeat(child)))
            self._keys += len(child.keys) - len(old_keys)
        if len(by_endpoint) != self._keys:
            self._index()

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity (unknown keys ignored)."""
        child = self._by_endpoint.get(key)
        if child is not None:
            self._states[key] = state
            picker = child.picker
            before = picker.state()
            picker.set_endpoint_state(key, state, now)
            if picker.state() is not before:
                self._view = None  # the READY choice changes only with a locality's state

    def _call_started(self, key: EndpointKey) -> None:
        """A call picked on ``key`` started: told to its locality's picker if that picker
        counts calls (least request's outstanding counts)."""
        child = self._by_endpoint.get(key)
        if child is not None and child.started is not None:
            child.started(key)

    def _call_finished(self, key: EndpointKey, ok: bool) -> None:
        """A call on ``key`` ended: told to its locality's picker if that picker counts
        calls."""
        child = self._by_endpoint.get(key)
        if child is not None and child.finished is not None:
            child.finished(key, ok)

    def _call_ended(self, key: EndpointKey, end: CallEnd) -> None:
        """A call on ``key`` ended (`CallEnd`): told to its locality's picker if that picker
        reads how calls end (weighted round robin's ORCA weights)."""
        child = self._by_endpoint.get(key)
        if child is not None and child.ended is not None:
            child.ended(key, end)

    def _load_report(self, key: EndpointKey, report: Any, now: float) -> None:
        """An out-of-band ORCA report from ``key``: told to its locality's picker if that
        picker reads them (weighted round robin)."""
        child = self._by_endpoint.get(key)
        if child is not None and child.reported is not None:
            child.reported(key, report, now)

    def state(self) -> ConnectivityState:
        """READY, CONNECTING, IDLE by the first any child is in; else TRANSIENT_FAILURE."""
        return self._current()[0]

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """What every locality's picker wants connected."""
        wanted: list[Endpoint] = []
        for child in self._children.values():
            wanted.extend(child.picker.wanted_connections())
        return tuple(wanted)

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """A READY locality at random by weight, then its picker's pick."""
        state, chosen, sums = self._view or self._current()
        if state is _CONNECTING:
            return PickResult(outcome=PickOutcome.QUEUE, cluster=self._cluster)
        if state is _IDLE:
            return self._leave_idle(request, rand, now)
        if not chosen:
            return PickResult(
                outcome=PickOutcome.FAIL,
                cluster=self._cluster,
                error="weighted_target: no localities",
            )
        if len(chosen) == 1:  # one locality (or one READY): no draw
            child = chosen[0]
        else:
            child = chosen[bisect.bisect_right(sums, rand.randrange(sums[-1]))]
        return self._located(child, child.picker.pick(request, rand, now))

    def _located(self, child: _Child, result: PickResult) -> PickResult:
        """``result`` of ``child``'s picker with the cluster and the locality (a plain COMPLETE
        one built once per endpoint)."""
        endpoint = result.endpoint
        plain = (
            result.outcome is _COMPLETE
            and not result.connect
            and not result.error
            and not result.drop_category
        )
        if plain:
            cached = child.results.get(id(endpoint))
            if cached is not None and cached.endpoint is endpoint:
                return cached
        located = PickResult(
            outcome=result.outcome,
            endpoint=endpoint,
            connect=result.connect,
            cluster=self._cluster,
            locality=child.locality,
            drop_category=result.drop_category,
            error=result.error,
        )
        if plain:
            child.results[id(endpoint)] = located
        return located

    def _leave_idle(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """C-core's queueing picker in IDLE: queue, and let every IDLE child leave IDLE."""
        connect: list[Endpoint] = []
        for child in self._children.values():
            if child.picker.state() is _IDLE:
                connect.extend(child.picker.pick(request, rand, now).connect)
        self._view = None
        return PickResult(outcome=PickOutcome.QUEUE, cluster=self._cluster, connect=tuple(connect))

    def flat(self) -> FlatRoundRobin | None:
        """This policy's picks as one `FlatRoundRobin` while it is READY and every READY
        locality is round robin (None otherwise): valid until the policy next changes."""
        state, chosen, sums = self._view or self._current()
        if state is not _READY or not chosen:
            return None
        choices = []
        for child in chosen:
            picker = child.picker
            if type(picker) is not RoundRobinPicker:
                return None
            ready = picker.ready_results()
            if not ready:
                return None
            choices.append((picker, [self._located(child, result) for result in ready]))
        return FlatRoundRobin(choices, sums)

    def _current(self) -> tuple[ConnectivityState, list[_Child], list[int]]:
        """The aggregated state and the children a pick chooses among (READY ones when READY,
        failed ones when TRANSIENT_FAILURE), with the running sums of their weights."""
        if self._view is not None:
            return self._view
        by_state: dict[ConnectivityState, list[_Child]] = {}
        for child in self._children.values():
            by_state.setdefault(child.picker.state(), []).append(child)
        for state in (_READY, _CONNECTING, _IDLE, _FAILED):
            if state in by_state or state is _FAILED:
                break
        chosen = by_state.get(state, []) if state in (_READY, _FAILED) else []
        sums: list[int] = []
        total = 0
        for child in chosen:
            total += child.locality.weight
            sums.append(total)
        self._view = (state, chosen, sums)
        return self._view
