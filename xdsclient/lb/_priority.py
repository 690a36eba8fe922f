"""Priority failover: the first usable priority of a cluster serves (gRFC A27, C-core's priority
policy, `src/core/load_balancing/priority/priority.cc`).

Why a block of its own: every balancer over EDS data must decide which priority serves, and the
rule gRPC applies has timers and memory that a "first healthy priority" loop gets wrong:

- Children are created lazily, in priority order, only when the choice reaches them: a lower
  priority costs no connection while a higher one is usable.
- A new child has a failover timer (10 s, C-core's ``kDefaultChildFailoverTimeout``). A child
  reporting CONNECTING restarts it only if it has been READY or IDLE since its last
  TRANSIENT_FAILURE; READY, IDLE and TRANSIENT_FAILURE cancel it. When it fires, the child
  counts as TRANSIENT_FAILURE until it reports a new state.
- The choice: the first priority whose child is READY or IDLE (lower priorities are then
  deactivated), else the first whose failover timer is pending; else the first child that is
  CONNECTING; else the last priority.
- A deactivated child is kept for 15 minutes (``kChildRetentionInterval``) and deleted after;
  reaching it again in the choice reactivates it with its state. A priority that leaves the
  assignment is deactivated the same way.
- Children are named by their localities across updates (C-core's cluster resolver: a new
  priority takes the name of the old priority holding its first known locality), so a priority
  whose localities move keeps its child, its connections and its outlier-detection data.

Time is passed in: `poll(now)` fires what is due and every call taking ``now`` polls first;
`next_deadline` says when to call again.

Cost at scale: an update hands each locality whose content did not change on to the children
as the *same object* it was before, so every block below (weighted target, endpoint lists,
ring hash) tells "unchanged" by identity; which keys each child holds and which keys the
assignment wants are counted by difference (`KeyCounts`), so one changed endpoint of 10,000
costs its locality, not the assignment. Endpoint states are kept only for the keys the
assignment holds (and those reported since the last update).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..resources import Endpoint, LocalityEndpoints
from ._base import (
    CallEnd,
    ChildPolicy,
    ConnectivityState,
    EndpointKey,
    LocalFailure,
    PickOutcome,
    PickRequest,
    PickResult,
    key_of,
)
from ._endpoint_list import KeyCounts, count_in, count_out

__all__ = ["CHILD_RETENTION", "FAILOVER_TIMEOUT", "PriorityPolicy"]

#: Seconds a new (or newly CONNECTING) priority has to become usable before the next is tried.
FAILOVER_TIMEOUT = 10.0
#: Seconds a deactivated priority's child is kept (with its connections) before it is deleted.
CHILD_RETENTION = 15 * 60.0

_READY, _IDLE = ConnectivityState.READY, ConnectivityState.IDLE
_CONNECTING = ConnectivityState.CONNECTING
_FAILURE = ConnectivityState.TRANSIENT_FAILURE


class _Child:
    """One priority's child and what the priority policy remembers of it.

    Invariants: ``state`` is what the choice reads (the child's last state, or
    TRANSIENT_FAILURE once the failover timer fired); ``reported`` is the child's own last
    state, so a change is noticed once; ``failover_at`` is set only while the timer runs.
    """

    __slots__ = (
        "abandoned",
        "deactivate_at",
        "ended",
        "failover_at",
        "finished",
        "keys",
        "name",
        "outcome",
        "policy",
        "reported",
        "reports",
        "seen_ready_or_idle",
        "started",
        "state",
    )

    def __init__(self, name: str, policy: ChildPolicy, failover_at: float) -> None:
        self.name = name
        self.policy = policy
        #: the keys of the child's endpoints: its priority's, counted by difference (kept as
        #: they were once the priority left the assignment, while the child is retained)
        self.keys = KeyCounts()
        self.state = _CONNECTING
        self.reported = _CONNECTING
        self.seen_ready_or_idle = True
        self.failover_at: float | None = failover_at
        self.deactivate_at: float | None = None
        #: the child's call hooks (least request counts calls), None when it has none
        self.started: Callable[[EndpointKey], None] | None = getattr(policy, "call_started", None)
        self.finished: Callable[[EndpointKey, bool], None] | None = getattr(
            policy, "call_finished", None
        )
        self.ended: Callable[[EndpointKey, CallEnd], None] | None = getattr(
            policy, "call_ended", None
        )
        self.reports: Callable[[EndpointKey, Any, float], None] | None = getattr(
            policy, "load_report", None
        )
        #: Envoy's outlier detection reads the outcome itself (None for other children)
        self.outcome: (
            Callable[[EndpointKey, bool, int | None, LocalFailure | None, float], None] | None
        ) = getattr(policy, "call_outcome", None)
        self.abandoned: Callable[[EndpointKey], None] | None = getattr(
            policy, "call_abandoned", None
        )


class PriorityPolicy:
    """Chooses the priority that serves, as gRPC's priority policy does, and picks through it.

    ``make_child`` builds a fresh child for a priority (`child_policy_for` in the composed
    picker). `update` takes the assignment's localities grouped by priority, 0 first.
    """

    def __init__(
        self,
        make_child: Callable[[], ChildPolicy],
        *,
        failover_timeout: float = FAILOVER_TIMEOUT,
        retention: float = CHILD_RETENTION,
    ) -> None:
        self._make_child = make_child
        self._failover_timeout = failover_timeout
        self._retention = retention
        self._children: dict[str, _Child] = {}
        #: child name per priority, and each priority's localities
        self._names: list[str] = []
        self._localities: dict[str, Sequence[LocalityEndpoints]] = {}
        self._next_name = 0
        self._current: _Child | None = None
        #: the endpoint states the transport reported for keys of the assignment (and keys
        #: reported since the last update), replayed to children created later
        self._endpoint_states: dict[EndpointKey, ConnectivityState] = {}
        #: each priority's keys, by child name (a child's `_Child.keys` is its priority's)
        self._keys_by_name: dict[str, KeyCounts] = {}
        #: the keys each priority gained at the last update (told their known states)
        self._came: dict[str, list[EndpointKey]] = {}
        #: how many priorities hold each key of the assignment
        self._wanted: dict[EndpointKey, int] = {}
        #: reported keys the assignment did not hold when reported (forgotten at the update)
        self._strays: set[EndpointKey] = set()
        self._added: tuple[EndpointKey, ...] = ()
        self._removed: tuple[EndpointKey, ...] = ()
        #: the earliest failover or retention deadline (infinity when none runs)
        self._deadline = _NEVER
        #: whether some child made so far has a hook for a call's start or end (a child's
        #: hooks never change): while none has, `call_started` and `call_finished` tell
        #: nobody, and a caller may leave them out
        self.hooked = False

    @property
    def serving(self) -> ChildPolicy | None:
        """The policy of the priority serving now (None: none)."""
        return None if self._current is None else self._current.policy

    @property
    def current_priority(self) -> int | None:
        """The priority serving now (None before the first update or with no priority)."""
        if self._current is None:
            return None
        return self._names.index(self._current.name)

    @property
    def children(self) -> dict[str, ChildPolicy]:
        """The children alive now (active or retained), by name."""
        return {name: child.policy for name, child in self._children.items()}

    @property
    def added_keys(self) -> tuple[EndpointKey, ...]:
        """The endpoint keys the last `update` brought into the assignment."""
        return self._added

    @property
    def removed_keys(self) -> tuple[EndpointKey, ...]:
        """The endpoint keys the last `update` took out of the assignment."""
        return self._removed

    def wants(self, key: EndpointKey) -> bool:
        """Whether the assignment holds the endpoint ``key`` (at any priority)."""
        return key in self._wanted

    def endpoint_states(self) -> dict[EndpointKey, ConnectivityState]:
        """The endpoint states kept (a copy): the assignment's reported keys only."""
        return dict(self._endpoint_states)

    def child_for(self, key: EndpointKey) -> ChildPolicy | None:
        """The live child holding the endpoint ``key`` (None when none does)."""
        child = self._holder(key)
        return None if child is None else child.policy

    def call_started(self, key: EndpointKey) -> None:
        """A call picked on ``key`` started: told to the child holding ``key`` if the child
        has a ``call_started(key)`` hook (least request counts calls in flight)."""
        child = self._current  # the usual holder, tested here to spare a call per pick
        if child is None or key not in child.keys.counts:
            child = self._holder(key)
        if child is not None and child.started is not None:
            child.started(key)

    def call_finished(
        self,
        key: EndpointKey,
        ok: bool,
        now: float = 0.0,
        elapsed: float = 0.0,
        load_report: Any = None,
        http_status: int | None = None,
        local_failure: LocalFailure | None = None,
    ) -> None:
        """A call on ``key`` ended: told to the child holding ``key`` if the child has a
        ``call_finished(key, ok)`` hook (outlier detection, least request), and as a
        `CallEnd` if it has a ``call_ended(key, end)`` hook (built only then); a child
        with a ``call_outcome`` hook (Envoy's outlier detection) also gets the response's
        ``http_status`` or the ``local_failure``."""
        child = self._current  # the usual holder, as in `call_started`
        if child is None or key not in child.keys.counts:
            child = self._holder(key)
        if child is None:
            return
        if child.finished is not None:
            child.finished(key, ok)
        if child.outcome is not None:
            child.outcome(key, ok, http_status, local_failure, now)
        if child.ended is not None:
            child.ended(key, CallEnd(ok=ok, elapsed=elapsed, now=now, load_report=load_report))

    def call_abandoned(self, key: EndpointKey) -> None:
        """A call picked on ``key`` was not made: the child holding it forgets it by its
        ``call_abandoned(key)`` hook, else as a call ended ok (least request counts it out);
        no `CallEnd` and no outcome."""
        child = self._holder(key)
        if child is None:
            return
        if child.abandoned is not None:
            child.abandoned(key)
        elif child.finished is not None:
            child.finished(key, True)

    def call_ended(self, key: EndpointKey, end: CallEnd) -> None:
        """How a call on ``key`` ended (`CallEnd`: latency, ORCA load report): told to the
        child holding ``key`` if the child has a ``call_ended(key, end)`` hook."""
        child = self._holder(key)
        if child is not None and child.ended is not None:
            child.ended(key, end)

    def load_report(self, key: EndpointKey, report: Any, now: float) -> None:
        """An out-of-band ORCA report from ``key``: told to the child holding ``key`` if the
        child has a ``load_report(key, report, now)`` hook."""
        child = self._holder(key)
        if child is not None and child.reports is not None:
            child.reports(key, report, now)

    def _holder(self, key: EndpointKey) -> _Child | None:
        current = self._current
        if current is not None and key in current.keys.counts:
            return current
        for child in self._children.values():
            if key in child.keys.counts:
                return child
        return None

    def update(self, priorities: Sequence[Sequence[LocalityEndpoints]], now: float) -> None:
        """A new assignment: children kept by locality, removed priorities deactivated."""
        self._expire(now)
        priorities = self._reuse(priorities)
        names = self._child_names(priorities)
        self._names = names
        self._localities = dict(zip(names, priorities, strict=True))
        added, removed = self._count_keys(names, priorities)
        self._added, self._removed = tuple(added), tuple(removed)
        states = self._endpoint_states
        for key in removed:
            states.pop(key, None)
        wanted = self._wanted
        for key in self._strays:
            if key not in wanted:
                states.pop(key, None)
        self._strays.clear()
        for name, child in self._children.items():
            if name in self._localities:
                self._update_child(child, self._localities[name], now)
                for key in self._came.get(name, ()):  # e.g. moved in from another priority
                    state = states.get(key)
                    if state is not None:
                        child.policy.set_endpoint_state(key, state, now)
                self._notice(child, now)
            else:
                self._deactivate(child, now)
        self._choose(now)

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The transport reports an endpoint's connectivity."""
        self._expire(now)
        self._endpoint_states[key] = state
        if key not in self._wanted:
            self._strays.add(key)
        changed = False
        for child in self._children.values():
            if key in child.keys.counts:
                child.policy.set_endpoint_state(key, state, now)
                changed = self._notice(child, now) or changed
        if changed:
            self._choose(now)

    def state(self) -> ConnectivityState:
        """The serving priority's state (TRANSIENT_FAILURE with no priority)."""
        return _FAILURE if self._current is None else self._current.state

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """What every live child wants connected (retained children keep their connections,
        as gRPC's do for the retention period)."""
        wanted: dict[EndpointKey, Endpoint] = {}
        for child in self._children.values():
            for endpoint in child.policy.wanted_connections():
                wanted.setdefault(key_of(endpoint), endpoint)
        return tuple(wanted.values())

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """One pick from the serving priority's child."""
        if now >= self._deadline:
            self._expire(now)
        if self._current is None:
            return _NO_PRIORITY
        return self._current.policy.pick(request, rand, now)

    def poll(self, now: float) -> None:
        """Fire the failover and retention timers that are due."""
        self._expire(now)

    def next_deadline(self) -> float | None:
        """When a timer is next due (None when none runs)."""
        return None if self._deadline == _NEVER else self._deadline

    # -- the choice (C-core's ChoosePriorityLocked) ------------------------------------------

    def _choose(self, now: float) -> None:
        self._current = None
        for priority, name in enumerate(self._names):
            child = self._children.get(name)
            if child is None:
                child = self._create(name, now)
            else:
                child.deactivate_at = None  # reactivated
            if child.state is _READY or child.state is _IDLE:
                self._current = child
                for lower in self._names[priority + 1 :]:
                    if lower in self._children:
                        self._deactivate(self._children[lower], now)
                break
            if child.failover_at is not None:
                self._current = child
                break
        else:
            connecting = [
                self._children[name]
                for name in self._names
                if self._children[name].state is _CONNECTING
            ]
            if connecting:
                self._current = connecting[0]
            elif self._names:
                self._current = self._children[self._names[-1]]
        self._reschedule()

    def _create(self, name: str, now: float) -> _Child:
        child = _Child(name, self._make_child(), now + self._failover_timeout)
        self._children[name] = child
        if child.started or child.finished or child.ended or child.outcome:
            self.hooked = True
        child.keys = self._keys_by_name[name]
        self._update_child(child, self._localities[name], now)
        for key in child.keys.counts:
            if key in self._endpoint_states:
                child.policy.set_endpoint_state(key, self._endpoint_states[key], now)
        self._notice(child, now)
        return child

    def _update_child(
        self, child: _Child, localities: Sequence[LocalityEndpoints], now: float
    ) -> None:
        child.policy.update(localities, now)

    def _count_keys(
        self, names: list[str], priorities: Sequence[Sequence[LocalityEndpoints]]
    ) -> tuple[list[EndpointKey], list[EndpointKey]]:
        """Count each priority's keys by difference (a child's keys are its priority's), and
        the assignment's from theirs: the keys that came into the assignment and went."""
        old = self._keys_by_name
        self._keys_by_name = {}
        self._came = {}
        came: list[list[EndpointKey]] = []
        went: list[list[EndpointKey]] = [list(old[n].counts) for n in old if n not in names]
        for name, group in zip(names, priorities, strict=True):
            counts = old.get(name) or KeyCounts()
            self._keys_by_name[name] = counts
            child = self._children.get(name)
            if child is not None:
                child.keys = counts
            more, fewer = counts.update(group)
            self._came[name] = more
            came.append(more)
            went.append(fewer)
        added: list[EndpointKey] = []
        removed: list[EndpointKey] = []
        for keys in came:  # priorities holding each key: in before out, so a move is neither
            count_in(self._wanted, keys, added)
        for keys in went:
            count_out(self._wanted, keys, removed)
        return added, removed

    def _reuse(
        self, priorities: Sequence[Sequence[LocalityEndpoints]]
    ) -> list[tuple[LocalityEndpoints, ...]]:
        """The assignment with each locality equal in every field (metadata too) to one of
        the last update given as that old object, so the blocks below see it unchanged."""
        previous = {loc.locality: loc for group in self._localities.values() for loc in group}
        reused: list[tuple[LocalityEndpoints, ...]] = []
        for group in priorities:
            same = []
            for locality in group:
                old = previous.get(locality.locality)
                same.append(old if old is not None and _same(old, locality) else locality)
            reused.append(tuple(same))
        return reused

    def _notice(self, child: _Child, now: float) -> bool:
        """Apply the child's state if it changed (C-core's OnConnectivityStateUpdateLocked)."""
        state = child.policy.state()
        if state is child.reported:
            return False
        child.reported = child.state = state
        if state is _CONNECTING:
            if child.seen_ready_or_idle and child.failover_at is None:
                child.failover_at = now + self._failover_timeout
        elif state is _READY or state is _IDLE:
            child.seen_ready_or_idle = True
            child.failover_at = None
        else:
            child.seen_ready_or_idle = False
            child.failover_at = None
        self._reschedule()
        return True

    def _deactivate(self, child: _Child, now: float) -> None:
        if child.deactivate_at is None:
            child.deactivate_at = now + self._retention
            self._reschedule()

    # -- timers --------------------------------------------------------------------------------

    def _reschedule(self) -> None:
        deadline = _NEVER
        for child in self._children.values():
            for at in (child.failover_at, child.deactivate_at):
                if at is not None and at < deadline:
                    deadline = at
        self._deadline = deadline

    def _expire(self, now: float) -> None:
        if now < self._deadline:
            return
        fired = False
        for name, child in list(self._children.items()):
            if child.deactivate_at is not None and now >= child.deactivate_at:
                del self._children[name]
                fired = True
            elif child.failover_at is not None and now >= child.failover_at:
                child.failover_at = None
                child.state = _FAILURE
                child.seen_ready_or_idle = False
                fired = True
        if fired:
            self._choose(now)
        else:
            self._reschedule()

    # -- naming --------------------------------------------------------------------------------

    def _child_names(self, priorities: Sequence[Sequence[LocalityEndpoints]]) -> list[str]:
        """A name per priority: the old priority's name holding its first known locality (each
        old name used once), else a new one."""
        owner: dict[object, str] = {}
        members: dict[str, list[object]] = {}
        for name in self._names:
            for locality in self._localities.get(name, ()):
                owner[locality.locality] = name
                members.setdefault(name, []).append(locality.locality)
        names: list[str] = []
        for group in priorities:
            reused = _first(owner.get(loc.locality) for loc in group)
            if reused is None:
                reused = f"child{self._next_name}"
                self._next_name += 1
            else:
                for member in members[reused]:
                    owner.pop(member, None)
            names.append(reused)
        return names


def _same(old: LocalityEndpoints, new: LocalityEndpoints) -> bool:
    """Equal in every field, each endpoint's metadata included (``tuple.__eq__`` compares
    all of an endpoint's fields, where ``Endpoint.__eq__`` leaves metadata out)."""
    if old is new:
        return True
    a, b = old.endpoints, new.endpoints
    return (
        old.weight == new.weight
        and old.priority == new.priority
        and old.locality == new.locality
        and len(a) == len(b)
        and all(map(tuple.__eq__, a, b))
    )


def _first(names: Iterable[str | None]) -> str | None:
    return next((name for name in names if name is not None), None)


_NEVER = float("inf")
_NO_PRIORITY = PickResult(
    outcome=PickOutcome.FAIL,
    error="no priority to pick from (empty assignment)",
)
