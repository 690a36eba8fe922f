"""Custom load-balancing policies (gRFC A52): a registry of factories by policy type, and the
guard that keeps a policy's failure inside the calls it picks for.

Why a registry of its own: gRPC balances a cluster by the first policy of its
``load_balancing_policy`` list that the client supports, built in or registered; registering
here also tells the cluster decoder the type is supported (`register_lb_policy_type`), so a
cluster naming only unregistered policies is NACKed as C-core NACKs it. The registry is
process-wide, as gRPC's is: register before the clusters that name the policy arrive (a
cluster already decoded is not decoded again).

A custom policy balances a whole priority: it is a `ChildPolicy` given the priority's
localities (each with its weight and endpoints), the endpoints' connectivity, and the optional
call hooks (``call_started``, ``call_finished``, ``call_ended`` with the ORCA load report). It is
used whether the cluster names it bare or inside ``wrr_locality`` (it sees the localities'
weights either way). A policy that raises does not take the channel down: the exception is
logged, the failing pick fails its call with UNAVAILABLE naming the policy and the error, and
a failure to build or update the policy fails the priority's picks until an update succeeds.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..resources import (
    CustomLbPolicy,
    Endpoint,
    LocalityEndpoints,
    register_lb_policy_type,
    unregister_lb_policy_type,
)
from ._base import (
    CallEnd,
    ChildPolicy,
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickRequest,
    PickResult,
    key_of,
)

__all__ = [
    "GuardedPolicy",
    "LbPolicyFactory",
    "custom_child",
    "orca_interval_of",
    "register_lb_policy",
]

logger = logging.getLogger("xdsclient.lb")

#: Builds a policy from its configuration: a dict (JSON values) from a ``TypedStruct``, or the
#: typed config message.
LbPolicyFactory = Callable[[Any], ChildPolicy]

_FACTORIES: dict[str, LbPolicyFactory] = {}
#: the out-of-band ORCA reporting interval each registered type asks for, in seconds
_ORCA_INTERVALS: dict[str, float] = {}
_LOCK = threading.Lock()


def _type_name(type_url: str) -> str:
    return type_url.rsplit("/", 1)[-1]


def register_lb_policy(
    type_url: str, factory: LbPolicyFactory | None, *, orca_interval: float | None = None
) -> None:
    """Register (or, with None, unregister) the policy of type ``type_url``
    (``type.googleapis.com/my.Policy`` or ``my.Policy``; in a cluster, the ``type_url`` of the
    ``TypedStruct`` that configures it, or its own message's type).

    ``factory(config)`` builds a fresh `ChildPolicy` for one priority of a cluster the policy
    balances, ``config`` the policy's configuration (a dict from a ``TypedStruct``, else the
    typed message). Clusters decoded from now on accept the type; a built-in policy's type
    cannot be replaced (`ValueError`). With ``orca_interval`` (seconds), a channel opens an
    out-of-band ORCA stream (gRFC A51) to every READY endpoint of the clusters the policy
    balances, asking for a report at that interval, and hands each report to the policy's
    ``load_report(key, report, now)`` hook."""
    name = _type_name(type_url)
    if orca_interval is not None and orca_interval <= 0:
        raise ValueError(f"orca_interval must be positive, not {orca_interval}")
    with _LOCK:
        _ORCA_INTERVALS.pop(name, None)
        if factory is None:
            _FACTORIES.pop(name, None)
            unregister_lb_policy_type(name)
            return
        register_lb_policy_type(name)  # raises for a built-in type
        _FACTORIES[name] = factory
        if orca_interval is not None:
            _ORCA_INTERVALS[name] = orca_interval


def orca_interval_of(policy: CustomLbPolicy) -> float | None:
    """The out-of-band ORCA interval the registered ``policy`` asks for (None: none)."""
    return _ORCA_INTERVALS.get(policy.type_name)


def custom_child(policy: CustomLbPolicy, *, cluster: str = "") -> ChildPolicy:
    """A guarded fresh instance of the registered ``policy`` for one priority of ``cluster``."""
    return GuardedPolicy(policy, _FACTORIES.get(policy.type_name), cluster=cluster)


class GuardedPolicy:
    """A custom policy whose exceptions fail picks, never the caller (see the module)."""

    def __init__(
        self, policy: CustomLbPolicy, factory: LbPolicyFactory | None, *, cluster: str = ""
    ) -> None:
        self._label = f"LB policy {policy.type_name} of cluster {cluster}"
        self._cluster = cluster
        self.policy: ChildPolicy | None = None
        #: why the policy cannot pick now (it failed to build or update), None when it can
        self.error: str | None = None
        #: the locality of each endpoint key, to name it in picks that do not (load reports)
        self._localities: dict[EndpointKey, LocalityEndpoints] = {}
        self._factory = factory
        self._config = policy.config
        if factory is None:
            self.error = f"{self._label}: no factory is registered"
            return
        self._build()

    def _build(self) -> None:
        assert self._factory is not None
        try:
            self.policy = self._factory(self._config)
        except Exception as exc:
            self.error = self._failed("build", exc)
        else:
            self.error = None

    def _failed(self, what: str, exc: BaseException) -> str:
        logger.exception("%s failed to %s", self._label, what)
        return f"{self._label} failed to {what}: {type(exc).__name__}: {exc}"

    def _fail(self, error: str) -> PickResult:
        return PickResult(outcome=PickOutcome.FAIL, error=error, cluster=self._cluster)

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        """The priority's localities, to the policy (a success clears an update's failure)."""
        self._localities = {
            key_of(endpoint): locality for locality in localities for endpoint in locality.endpoints
        }
        if self.policy is None and self._factory is not None:
            self._build()  # a factory that failed is asked again at each update
        if self.policy is None:
            return
        try:
            self.policy.update(localities, now)
        except Exception as exc:
            self.error = self._failed("update", exc)
        else:
            self.error = None

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """An endpoint's connectivity, to the policy."""
        if self.policy is not None:
            try:
                self.policy.set_endpoint_state(key, state, now)
            except Exception:
                logger.exception("%s failed on a connectivity change", self._label)

    def state(self) -> ConnectivityState:
        """The policy's state; TRANSIENT_FAILURE while it cannot pick."""
        if self.policy is None or self.error is not None:
            return ConnectivityState.TRANSIENT_FAILURE
        try:
            return self.policy.state()
        except Exception as exc:
            self.error = self._failed("report its state", exc)
            return ConnectivityState.TRANSIENT_FAILURE

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """What the policy wants connected (nothing while it cannot pick)."""
        if self.policy is None or self.error is not None:
            return ()
        try:
            return tuple(self.policy.wanted_connections())
        except Exception:
            logger.exception("%s failed to list its connections", self._label)
            return ()

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """The policy's pick; FAIL with the error when it raises or cannot pick."""
        if self.error is not None:
            return self._fail(self.error)
        assert self.policy is not None
        try:
            result = self.policy.pick(request, rand, now)
        except Exception as exc:
            return self._fail(self._failed("pick", exc))
        endpoint = result.endpoint
        if result.locality is None and endpoint is not None:
            result = attrs.evolve(result, locality=self._localities.get(key_of(endpoint)))
        return result

    def call_started(self, key: EndpointKey) -> None:
        """Passed to the policy's hook, if it has one."""
        self._hook("call_started", key)

    def call_finished(self, key: EndpointKey, ok: bool) -> None:
        """Passed to the policy's hook, if it has one."""
        self._hook("call_finished", key, ok)

    def call_ended(self, key: EndpointKey, end: CallEnd) -> None:
        """Passed to the policy's hook, if it has one."""
        self._hook("call_ended", key, end)

    def load_report(self, key: EndpointKey, report: Any, now: float) -> None:
        """An out-of-band ORCA report, to the policy's hook, if it has one."""
        self._hook("load_report", key, report, now)

    def _hook(self, name: str, *args: Any) -> None:
        hook = getattr(self.policy, name, None)
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            logger.exception("%s failed in %s", self._label, name)
