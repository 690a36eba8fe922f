"""Seeded bugs as a faults object: the hooks the server streams call at defined points.

Why not checks inside the serving rules: the rules (`_server_sotw.py`, `_server_delta.py`)
say what a correct server does, and read best without the eighteen ways to get it wrong. They
call these hooks instead, each at one point of a request's or a response's way:

- `refuse`: a request arrives, before the rules see it (dropped, or the stream ends over it);
- `resend_all`: an ACK or NACK is read (forget what the stream was sent, answer it again);
- `answer_stale`, `resend_on_subscribe`, `honour_initial_versions`: a request is applied;
- `send_unrequested`, `full_state`, `send_absent`: a response's contents are chosen;
- `nonce`: a response is numbered;
- `mangle`: a response is on its way out (every one, raw ones too) - `mangles` says whether
  it may, so the clean server encodes shared bytes without building each message.

`Faults()` is the clean server: every hook answers as the spec says.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import attrs

from .._names import WILDCARD
from ..resources import BUILTIN_TYPES
from ._seeded import SeededBug

__all__ = ["DROP", "Abort", "Faults"]

_KNOWN_TYPES = frozenset(rtype.type_url for rtype in BUILTIN_TYPES)
_MANGLING = frozenset(
    {
        SeededBug.WRONG_TYPE_URL,
        SeededBug.V2_ANY_TYPES,
        SeededBug.EMPTY_VERSION,
        SeededBug.DELTA_NO_VERSION,
        SeededBug.DUPLICATE_RESOURCE,
    }
)


@attrs.frozen
class Abort:
    """End a stream with this gRPC status (by name, e.g. ``"INVALID_ARGUMENT"``); the empty
    code means: end nothing, drop the request (`DROP`)."""

    code: str
    details: str = ""


#: `Faults.refuse`'s answer for a request read and then ignored.
DROP = Abort("")


def _v2(type_url: str) -> str:
    """The v2 spelling of a v3 type URL (a control plane stuck on the v2 API)."""
    for v3, v2 in (("envoy.config.listener.v3.Listener", "envoy.api.v2.Listener"),
                   ("envoy.config.route.v3.RouteConfiguration", "envoy.api.v2.RouteConfiguration"),
                   ("envoy.config.cluster.v3.Cluster", "envoy.api.v2.Cluster"),
                   ("envoy.config.endpoint.v3.ClusterLoadAssignment",
                    "envoy.api.v2.ClusterLoadAssignment")):  # fmt: skip
        type_url = type_url.replace(v3, v2)
    return type_url


class Faults:
    """The seeded bugs a control plane makes (none by default), as hooks."""

    def __init__(self, bugs: Collection[SeededBug] = ()) -> None:
        self.bugs = frozenset(bugs)
        #: Delta ``initial_resource_versions`` are ignored (a switch tests flip at run time).
        self.ignore_initial_resource_versions = False
        self.answer_stale = SeededBug.ANSWER_STALE in self.bugs
        self.resend_on_subscribe = SeededBug.NO_RESEND_ON_SUBSCRIBE not in self.bugs
        self.send_unrequested = SeededBug.UNREQUESTED_RESOURCES in self.bugs
        self.full_state = SeededBug.PARTIAL_STATE not in self.bugs
        self.send_absent = SeededBug.NO_DELTA_ABSENT not in self.bugs
        self.late_subscription_waits = SeededBug.LATE_SUBSCRIPTION_WAITS in self.bugs
        self.mangles = bool(self.bugs & _MANGLING)

    @property
    def honour_initial_versions(self) -> bool:
        """Whether a new Delta stream's ``initial_resource_versions`` count as sent."""
        return not (
            self.ignore_initial_resource_versions or SeededBug.IGNORE_INITIAL_VERSIONS in self.bugs
        )

    def refuse(
        self, request: Any, *, first: bool, delta: bool, subscribed: Collection[str]
    ) -> Abort | None:
        """A request arrives: `DROP` it, end the stream (`Abort`), or None to serve it.
        ``subscribed``: the names the stream holds of the request's type (Delta)."""
        bugs = self.bugs
        if not bugs:
            return None
        if SeededBug.NODE_REQUIRED in bugs and not first and not request.HasField("node"):
            return DROP
        known = request.type_url in _KNOWN_TYPES or not request.type_url
        if SeededBug.UNKNOWN_TYPE_ABORTS in bugs and not known:
            return Abort("INVALID_ARGUMENT", f"unknown type {request.type_url}")
        if SeededBug.PHANTOM_UNSUBSCRIBE_ABORTS in bugs and delta:
            phantom = set(request.resource_names_unsubscribe) - set(subscribed) - {WILDCARD}
            if phantom:
                return Abort("INVALID_ARGUMENT", f"not subscribed: {phantom}")
        return None

    def resend_all(self, request: Any) -> bool:
        """An ACK or NACK is read: whether to forget what was sent and send it all again."""
        if not self.bugs or not request.response_nonce:
            return False
        nack = request.HasField("error_detail")
        return SeededBug.ECHO_ON_ACK in self.bugs or (
            nack and SeededBug.RESEND_AFTER_NACK in self.bugs
        )

    def nonce(self, stream_id: int, fresh: Callable[[], str]) -> str:
        """A response's nonce: ``fresh()`` unless a bug numbers it otherwise."""
        if SeededBug.NO_NONCE in self.bugs:
            return ""
        if SeededBug.REUSED_NONCE in self.bugs:
            return f"{stream_id}-1"
        return fresh()

    def mangle(self, response: Any, *, delta: bool) -> None:
        """A response is on its way out: change it as the bugs say (in place)."""
        bugs = self.bugs
        if SeededBug.WRONG_TYPE_URL in bugs:
            response.type_url = _v2(response.type_url)
        if SeededBug.V2_ANY_TYPES in bugs:
            for item in response.resources:
                packed = item.resource if delta else item
                packed.type_url = _v2(packed.type_url)
        if SeededBug.EMPTY_VERSION in bugs and not delta:
            response.version_info = ""
        if SeededBug.DELTA_NO_VERSION in bugs and delta:
            for item in response.resources:
                item.version = ""
        if SeededBug.DUPLICATE_RESOURCE in bugs and response.resources:
            response.resources.append(response.resources[0])
