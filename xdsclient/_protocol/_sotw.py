"""State-of-the-World state for one resource type.

Why separate: SotW requests restate the whole interest every time, carry a per-type version and
the last nonce, and SotW responses name resources only inside their bodies (or a `Resource`
wrapper); LDS/CDS responses are the full state, so absence means deletion.

Invariants (grpc-go's ads_stream.go says the same):
- ``version_info`` is the last *accepted* version of the type. It survives a broken stream and
  is sent on the first request of the next one; a NACK carries it unchanged.
- ``nonce`` is the last nonce received on the current stream; a new stream starts with none.
- LDS/CDS responses are the full state, except one made only of heartbeats (body-less
  ``Resource``s), which refreshes TTLs and deletes nothing.
- Wildcard: when the wildcard is the only interest and no explicit name went out on this stream,
  the request is the legacy empty list; otherwise ``*`` is sent explicitly beside the names.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from .._names import RESOURCE_WRAPPER_TYPE_URL, WILDCARD
from ._classify import COMPILED, Classifier, resource_values, upb_values
from ._events import Event
from ._messages import DiscoveryRequest, Request, Resource
from ._status import ResourceStatus
from ._typestate import TypeState, duration_seconds

__all__ = ["SotwTypeState"]

_NACKED = ResourceStatus.NACKED
_REQUESTED = ResourceStatus.REQUESTED


class SotwTypeState(TypeState):
    """Subscription state, cache and ACK bookkeeping for one type over SotW."""

    def _init_variant(self) -> None:
        self.version_info = ""
        self.nonce = ""
        self._explicit_sent = False
        #: the resource_names of the last request on this stream (None before the first)
        self._sent_names: list[str] | None = None

    def accepted_version(self) -> str:
        return self.version_info

    def reject(self, nonce: str, reason: str) -> None:
        self.nonce = nonce
        super().reject(nonce, reason)

    def reset_stream(self) -> None:
        super().reset_stream()
        self.nonce = ""
        self._explicit_sent = False
        self._sent_names = None

    def resource_names(self) -> list[str]:
        """The ``resource_names`` of the next request."""
        names = list(self.names)
        if self.wildcard and (names or self._explicit_sent):
            names.insert(0, WILDCARD)
        return names

    def _build_requests(self) -> list[Request]:
        acks = self.pending_acks
        if not acks and (not self.dirty or (not self.sent_on_stream and not self.has_interest)):
            return []
        names = self.resource_names()
        if not acks and names == self._sent_names:
            return []  # the interest changed and changed back: nothing to tell the server
        self._sent_names = names
        if names:
            self._explicit_sent = True
        if not acks:
            return [
                DiscoveryRequest(
                    type_url=self.type_url,
                    version_info=self.version_info,
                    response_nonce=self.nonce,
                    resource_names=names,
                )
            ]
        return self.answers(
            lambda _, ack: DiscoveryRequest(
                type_url=self.type_url,
                version_info=ack.version,
                response_nonce=ack.nonce,
                resource_names=names,
            )
        )

    def receive(
        self, response: Any, now: float, events: list[Event], raw: bytes | None = None
    ) -> None:
        """Apply one DiscoveryResponse for this type and queue its ACK or NACK; ``raw``: the
        bytes it was decoded from, if the transport kept them (else, compiled, the message is
        serialized again to read its resources from bytes)."""
        self.nonce = response.nonce
        version = response.version_info
        type_url = self.type_url
        wanted = None if self.wildcard else self.names
        classified = self.classifier()

        def unwrap(index: int, packed: Any) -> None:
            self._unwrap(index, packed, version, classified, wanted)

        resources = response.resources
        values = None
        if COMPILED:
            wire = response.SerializeToString() if raw is None else raw
            values = resource_values(wire, type_url.encode())
            del wire
        if values is None or len(values) != len(resources):
            values = upb_values(resources, type_url)
        classified.sotw_bodies(resources, values, version, wanted, unwrap)
        classified.finish()
        classified.version = version
        self.apply_classified(classified, self._keys, now, events)
        covered = self.apply_server_errors(response.resource_errors, now, events)
        self._delete_absent(classified, covered, now, events)
        classified.release()
        self.answer(response.nonce, classified.errors, version)
        if not classified.errors:
            self.version_info = version

    def _keys(self, name: str) -> tuple[str, ...]:
        return (name,) if self.wildcard or name in self.names else ()

    def _delete_absent(
        self, classified: Classifier, covered: set[str], now: float, events: list[Event]
    ) -> None:
        """LDS/CDS: a resource seen before and absent from a full state was deleted. One never
        seen may simply not be in this response yet (the request naming it may be in flight).
        A response of heartbeats alone refreshes TTLs; it is not a state of the world."""
        complete = self.options.complete_state
        if not (complete or self.rtype.all_resources_required_in_sotw):
            return
        if not classified.every_name_known:
            return
        if classified.bodiless and not classified.valid and not classified.invalid:
            return
        for name in self.entries.keys() - classified.seen - covered:
            status = self.entries[name].status
            if status.holds_value or status is _NACKED or (complete and status is _REQUESTED):
                self.apply_deletion(name, now, events, classified.version)

    def _unwrap(
        self,
        index: int,
        packed: Any,
        version: str,
        classified: Classifier,
        wanted: Container[str] | None,
    ) -> None:
        """A resource inside a `Resource` wrapper: its own name, version and TTL (heartbeats
        repeat the version of what they refresh)."""
        if packed.type_url != RESOURCE_WRAPPER_TYPE_URL:
            classified.unnamed(index, f"type {packed.type_url or '(none)'} is not {self.type_url}")
            return
        try:
            wrapper = Resource.FromString(packed.value)
        except Exception as exc:
            classified.unnamed(index, f"cannot parse the Resource wrapper: {exc}")
            return
        name = wrapper.name
        ttl = duration_seconds(wrapper.ttl) if wrapper.HasField("ttl") else None
        inner = wrapper.resource if wrapper.HasField("resource") else None
        mismatch = None
        if inner is None:
            mismatch = "a Resource with neither name nor body"
        elif inner.type_url != self.type_url:
            mismatch = f"type {inner.type_url or '(none)'} is not {self.type_url}"
        if not name:
            if inner is None or mismatch is not None:
                classified.unnamed(index, mismatch or "")
            else:
                classified.body(index, inner.value, wrapper.version or version, ttl, "", wanted)
            return
        name = classified.named(index, name)
        if not name:
            return
        if inner is None:
            classified.bodiless.append((name, wrapper.version, ttl))
        elif mismatch is not None:
            classified.invalid[name] = mismatch
        else:
            body_version = wrapper.version or version
            classified.body(index, inner.value, body_version, ttl, name, wanted, True)
