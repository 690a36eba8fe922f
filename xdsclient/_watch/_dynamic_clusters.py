"""The shell of a configuration watch's dynamic clusters (`ConfigWatch.resolve_cluster`).

Why apart from the watch: the watch keeps one walk current; this part answers "resolve this
cluster now" for a data plane, with the client's on-demand resolver (one subscription per name,
names batched while the first on-demand request of CDS is unanswered), the holds of
`_cluster_holds` (a held cluster is walked, with its endpoints, and leaves the walk a grace
period after its last holder), and the watch's published snapshots. Every wait is on the
client's `Clock`, so a `FakeClock` drives timeouts and grace periods in tests.

The outcome of a resolve (`Outcome`): `Available` once a published snapshot holds the cluster
in ``clusters`` (with its endpoints, or their error, or an aggregate's leaves), so a data plane
can pick in it as soon as it has that snapshot; `Missing` when the server said the cluster
does not exist (or the name cannot be a cluster's); `TimedOut` when neither came in time
(a snapshot that cannot be published, with the listener itself unusable, included).
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Callable
from typing import Any, Protocol

from .._errors import ClientClosedError, ResourceDoesNotExistError
from .._runtime._clock import Clock
from ..resources import CLUSTER
from ._cluster_holds import ClusterHolds
from ._dependencies import XdsConfig
from ._resolve import Available, Missing, Outcome, TimedOut

__all__ = ["ClusterSubscription", "DynamicClusters", "OnDemand"]


class OnDemand(Protocol):
    """What dynamic clusters need of the client: its resolver (`_resolver.Resolver`)."""

    @property
    def clock(self) -> Clock: ...

    @property
    def grace(self) -> float: ...

    async def resolve_name(self, type_url: str, name: str, timeout: float) -> Outcome:
        """`XdsClient.resolve` for a name given by a data plane (a bad one raises ValueError)."""
        ...

    def count_cluster(self, outcome: Outcome) -> None:
        """Count a finished `ConfigWatch.resolve_cluster` by its outcome."""
        ...


class ClusterSubscription:
    """A data plane's hold on a cluster in one configuration watch (gRFC A74's cluster
    subscription). While held (and ``on_demand_grace`` seconds after `release`), the cluster
    resolved by `resolve` stays in the watch's snapshots with its endpoints. A context manager:
    leaving ``with`` releases it."""

    def __init__(self, owner: DynamicClusters, name: str) -> None:
        self._owner = owner
        self.name = name
        self._released = False
        owner.holds.hold(name)

    @property
    def released(self) -> bool:
        """Whether `release` was called."""
        return self._released

    async def resolve(self, *, timeout: float = 5.0) -> Outcome:
        """`Available` once a published snapshot holds the cluster, `Missing` when the server
        said it does not exist, else `TimedOut` after ``timeout`` seconds of the client's clock."""
        if self._released:
            raise RuntimeError(f"the subscription of cluster {self.name!r} was released")
        return await self._owner.resolve(self.name, timeout)

    def release(self) -> None:
        """Stop holding the cluster (idempotent): it leaves the walk after the grace period
        unless something holds it again."""
        if not self._released:
            self._released = True
            self._owner.release(self.name)

    def __enter__(self) -> ClusterSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"<ClusterSubscription {self.name!r} {state}>"

    def __del__(self) -> None:
        if not self._released:  # dropped while held: it would hold the cluster forever
            warnings.warn(
                f"{self!r} was never released: use `with` or call release(); it is released now",
                ResourceWarning,
                source=self,
                stacklevel=2,
            )
            with contextlib.suppress(RuntimeError):  # no running loop for its grace timer
                self.release()


class DynamicClusters:
    """The dynamic clusters of one `ConfigWatch` (see the module's docstring)."""

    def __init__(
        self,
        on_demand: OnDemand,
        *,
        rewalk: Callable[[], None],
        latest: Callable[[], XdsConfig | None],
        start_task: Callable[..., asyncio.Task[None]],
    ) -> None:
        self._on_demand = on_demand
        self._rewalk = rewalk
        self._latest = latest
        self._start_task = start_task
        self.holds = ClusterHolds(grace=on_demand.grace)
        self._waiters: dict[str, list[asyncio.Future[Available | Missing]]] = {}
        self._cancelled = False

    @property
    def names(self) -> tuple[str, ...]:
        """The clusters the walk includes for subscriptions."""
        return self.holds.admitted

    def subscribe(self, name: str) -> ClusterSubscription:
        """Hold ``name`` until the subscription returned is released."""
        return ClusterSubscription(self, name)

    async def resolve(self, name: str, timeout: float) -> Outcome:
        """The outcome for the held ``name`` (see the module's docstring), counted."""
        outcome = await self._resolve(name, timeout)
        self._on_demand.count_cluster(outcome)
        return outcome

    async def _resolve(self, name: str, timeout: float) -> Outcome:
        clock = self._on_demand.clock
        deadline = clock.time() + timeout
        known = self._settled(name)
        if known is not None:
            self._admit(name)
            return known
        try:
            outcome = await self._on_demand.resolve_name(CLUSTER.type_url, name, timeout)
        except ValueError as exc:  # a name no cluster can have (from a request header, say)
            return Missing(error=ResourceDoesNotExistError(CLUSTER.type_url, name, str(exc)))
        if isinstance(outcome, TimedOut) or self._cancelled:
            return TimedOut(timeout=timeout)
        self._admit(name)
        if isinstance(outcome, Missing):
            return outcome
        return await self._published(name, deadline, timeout)

    def _settled(self, name: str) -> Available | Missing | None:
        """What the latest snapshot says of ``name``, when it settles a resolve."""
        config = self._latest()
        if config is None or name not in config.clusters:
            return None
        return _settled_in(config, name)

    def _admit(self, name: str) -> None:
        if self.holds.admit(name):
            self._rewalk()

    async def _published(self, name: str, deadline: float, timeout: float) -> Outcome:
        """Wait until a published snapshot settles ``name``, at most until ``deadline``."""
        known = self._settled(name)
        if known is not None:
            return known
        future: asyncio.Future[Available | Missing] = asyncio.get_running_loop().create_future()
        waiting = self._waiters.setdefault(name, [])
        waiting.append(future)
        timer = asyncio.ensure_future(self._on_demand.clock.sleep_until(deadline))
        try:
            either: list[asyncio.Future[Any]] = [future, timer]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if future in waiting:
                waiting.remove(future)
            if not waiting:
                self._waiters.pop(name, None)
        if future.done() and not future.cancelled():
            return future.result()
        future.cancel()
        return TimedOut(timeout=timeout)

    def published(self, config: XdsConfig) -> None:
        """The watch published ``config``: answer the resolves it settles."""
        if not self._waiters:
            return
        for name in [n for n in self._waiters if n in config.clusters]:
            known = _settled_in(config, name)
            if known is None:
                continue
            for future in self._waiters.pop(name):
                if not future.done():
                    future.set_result(known)

    def release(self, name: str) -> None:
        """A subscription of ``name`` was released."""
        clock = self._on_demand.clock
        when = self.holds.release(name, clock.time())
        if when is not None and not self._cancelled:
            with contextlib.suppress(ClientClosedError):  # closed: its walks are gone too
                self._start_task(self._release_at(when), name="xdsclient-cluster-grace")

    async def _release_at(self, when: float) -> None:
        clock = self._on_demand.clock
        await clock.sleep_until(when)
        if self.holds.due(clock.time()) and not self._cancelled:
            self._rewalk()

    def cancel(self) -> None:
        """The watch ended: every waiting resolve is answered `TimedOut` (by its timer's
        caller), and nothing re-walks."""
        self._cancelled = True
        for futures in self._waiters.values():
            for future in futures:
                future.cancel()
        self._waiters.clear()


def _settled_in(config: XdsConfig, name: str) -> Available | Missing | None:
    """What ``config`` says of the cluster ``name`` (in its ``clusters``), when it settles a
    resolve: unusable for another reason (invalid, unreachable) does not, as a later value may
    be valid."""
    entry = config.clusters[name]
    if entry.cluster is not None:
        return Available(view=entry.cluster)
    if isinstance(entry.error, ResourceDoesNotExistError):
        return Missing(error=entry.error)
    return None
