"""The Delta server stream's rules: per-resource versions, subscriptions, removals.

Why these rules (xDS spec, "Incremental xDS"):
- The server tracks per resource the version the client holds: what it lacks or holds at
  another version is sent; what it holds that is gone is named in ``removed_resources``.
- A new stream's ``initial_resource_versions`` are what the client holds already, so they are
  not sent again (unless the faults say otherwise).
- The first request of a type naming nothing subscribes to everything (wildcard), as ``*``
  does; unsubscribing ``*`` leaves only the names (`Mode`, `TRANSITIONS`).
- A subscribed name that does not exist is sent once as a ``Resource`` without a body
  ("Knowing When a Requested Resource Does Not Exist"); subscribing to it again asks again.
- A name subscribed again is resent even if sent before (the client may have dropped it).
- VHDS and on-demand clusters are answered as Envoy expects (`_server_vhds`): virtual hosts
  by alias, re-sent when their route configuration changes; an unknown cluster in
  ``removed_resources``.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Any

import attrs

from .._names import WILDCARD
from .._protocol._messages import DeltaDiscoveryResponse
from ..resources import CLUSTER, ROUTE_CONFIGURATION, VIRTUAL_HOST
from ._encoding import Encoded
from ._server_stream import Mode, ServerStream, beat
from ._server_vhds import vhds_response

__all__ = ["TRANSITIONS", "DeltaServerStream", "Step"]


class Step(enum.Enum):
    """One thing a Delta request does to a type's wildcard, in the order it is applied: its
    subscriptions first, then each ``*`` it unsubscribes."""

    SUBSCRIBE_NOTHING = "subscribes to no name"
    SUBSCRIBE_NAMES = "subscribes to names, not '*'"
    SUBSCRIBE_STAR = "subscribes to '*'"
    UNSUBSCRIBE_STAR = "unsubscribes '*'"

    __hash__ = object.__hash__


_M, _S = Mode, Step

#: (mode of the type, step) -> the mode after it.
TRANSITIONS: dict[tuple[Mode, Step], Mode] = {
    (_M.UNREQUESTED, _S.SUBSCRIBE_NOTHING): _M.WILDCARD,
    (_M.UNREQUESTED, _S.SUBSCRIBE_NAMES): _M.NAMED,
    (_M.UNREQUESTED, _S.SUBSCRIBE_STAR): _M.WILDCARD,
    (_M.WILDCARD, _S.SUBSCRIBE_NOTHING): _M.WILDCARD,
    (_M.WILDCARD, _S.SUBSCRIBE_NAMES): _M.WILDCARD,
    (_M.WILDCARD, _S.SUBSCRIBE_STAR): _M.WILDCARD,
    (_M.WILDCARD, _S.UNSUBSCRIBE_STAR): _M.NAMED,
    (_M.NAMED, _S.SUBSCRIBE_NOTHING): _M.NAMED,
    (_M.NAMED, _S.SUBSCRIBE_NAMES): _M.NAMED,
    (_M.NAMED, _S.SUBSCRIBE_STAR): _M.WILDCARD,
    (_M.NAMED, _S.UNSUBSCRIBE_STAR): _M.NAMED,
}


def subscribing(names: set[str]) -> Step:
    """The step a request's ``resource_names_subscribe`` make."""
    if WILDCARD in names:
        return Step.SUBSCRIBE_STAR
    return Step.SUBSCRIBE_NAMES if names else Step.SUBSCRIBE_NOTHING


@attrs.define
class _Subscription:
    """What one stream wants of one type, and what the client holds."""

    mode: Mode = Mode.UNREQUESTED
    names: set[str] = attrs.Factory(set)  # subscribed by name (without '*')
    sent: dict[str, str] = attrs.Factory(dict)  # name -> version the client has (or was sent)
    absent: set[str] = attrs.Factory(set)  # told not to exist (a body-less Resource)

    def wants(self, name: str) -> bool:
        return self.mode.wildcard or name in self.names


class DeltaServerStream(ServerStream):
    """A Delta stream (``DeltaAggregatedResources`` or a per-type ``Delta*``)."""

    delta = True

    def _subscribed(self, type_url: str) -> Collection[str]:
        sub = self._subs.get(type_url)
        return () if sub is None else sub.names

    def _apply(self, type_url: str, request: Any) -> None:
        sub: _Subscription = self._subs.setdefault(type_url, _Subscription())
        subscribe = set(request.resource_names_subscribe)
        if self._faults.resend_all(request):
            sub.sent.clear()
        if sub.mode is Mode.UNREQUESTED:
            if self._faults.honour_initial_versions:
                sub.sent.update(request.initial_resource_versions)
        elif self._faults.late_subscription_waits:  # taken as held: sent when it changes
            for name in subscribe - {WILDCARD} - sub.names:
                stored = self._store.get(type_url, name)
                if stored is not None:
                    sub.sent[name] = stored.version
        elif self._faults.resend_on_subscribe:
            for name in subscribe - {WILDCARD}:
                sub.sent.pop(name, None)
        sub.mode = TRANSITIONS[sub.mode, subscribing(subscribe)]
        sub.absent -= subscribe
        sub.names |= subscribe - {WILDCARD}
        for name in request.resource_names_unsubscribe:
            if name == WILDCARD:
                sub.mode = TRANSITIONS[sub.mode, Step.UNSUBSCRIBE_STAR]
            else:
                sub.names.discard(name)
                sub.absent.discard(name)
            if not sub.wants(name):
                sub.sent.pop(name, None)
        if not sub.mode.wildcard:
            # What the client held only through the wildcard it may drop on leaving it: a later
            # subscription by name must send it again, not take it as held.
            for name in [n for n in sub.sent if n not in sub.names]:
                del sub.sent[name]

    def changed(self, type_url: str) -> bool:
        """As every stream's, and a route configuration's change owes its virtual hosts."""
        owed = False
        if type_url == ROUTE_CONFIGURATION.type_url and self.asked_for(VIRTUAL_HOST.type_url):
            self._dirty.add(VIRTUAL_HOST.type_url)
            owed = True
        return super().changed(type_url) or owed

    def _reply(self, type_url: str, sub: _Subscription) -> Encoded | None:
        if type_url == VIRTUAL_HOST.type_url and not sub.mode.wildcard:
            response = vhds_response(self._store, sub, self._nonce)
            return None if response is None else self._encoder.message(response, delta=True)
        everything = self._faults.send_unrequested or sub.mode.wildcard
        sent = sub.sent
        wanted = self._store.select(type_url, None if everything else sub.names)
        changed = [(name, s) for name, s in wanted if sent.get(name) != s.version]
        stored = self._store.of_type(type_url)
        removed = [name for name in sub.sent if name not in stored]
        absent: list[str] = []
        if self._faults.send_absent:
            absent = sorted(
                n
                for n in sub.names
                if n not in stored and n not in sub.sent and n not in sub.absent
            )
        if type_url == CLUSTER.type_url and absent:  # on-demand CDS: Missing is a removal
            removed.extend(absent)
        if not changed and not removed and not absent:
            return None
        nonce = self._nonce()
        version = self._store.type_version(type_url)
        bodiless = () if type_url == CLUSTER.type_url else absent
        encoded = self._encoder.delta(type_url, version, changed, removed, bodiless, nonce)
        for name, s in changed:
            sub.sent[name] = s.version
        for name in removed:
            sub.sent.pop(name, None)
        sub.absent.update(absent)
        return encoded

    def heartbeat(self, type_url: str, name: str) -> Any:
        """A TTL refresh (a body-less ``Resource``) of a resource this stream holds at its
        current version, or None."""
        stored = self._store.get(type_url, name)
        sub: _Subscription | None = self._subs.get(type_url)
        if stored is None or sub is None or sub.sent.get(name) != stored.version:
            return None
        refresh = beat(name, stored)
        return DeltaDiscoveryResponse(
            type_url=type_url, nonce=self.next_nonce(), resources=[refresh]
        )
