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

from typing import Any

from .._errors import ResourceDecodeError, ResourceValidationError
from .._names import RESOURCE_WRAPPER_TYPE_URL, WILDCARD
from ..resources._type import ResourceType
from ._cache import Table
from ._deadlines import Deadlines
from ._events import Event
from ._messages import DiscoveryRequest, Request, Resource
from ._options import ProtocolOptions
from ._status import Input, ResourceStatus
from ._typestate import (
    Ack,
    DeadlineKey,
    TypeState,
    ValidItem,
    duration_seconds,
    nack_message,
    name_too_long,
)

__all__ = ["SotwTypeState"]

_NACKED = ResourceStatus.NACKED
_INVALID = Input.INVALID


class SotwTypeState(TypeState):
    """Subscription state, cache and ACK bookkeeping for one type over SotW."""

    def __init__(
        self,
        rtype: ResourceType[Any],
        options: ProtocolOptions,
        deadlines: Deadlines[DeadlineKey],
        entries: Table,
    ) -> None:
        super().__init__(rtype, options, deadlines, entries)
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
        requests = []
        for ack in acks:
            request = DiscoveryRequest(
                type_url=self.type_url,
                version_info=ack.version,
                response_nonce=ack.nonce,
                resource_names=names,
            )
            if ack.error is not None:
                request.error_detail.code = 3  # INVALID_ARGUMENT, as gRPC Go and Java send
                request.error_detail.message = ack.error
            requests.append(request)
        return requests

    def receive(self, response: Any, now: float, events: list[Event]) -> None:
        """Apply one DiscoveryResponse for this type and queue its ACK or NACK."""
        self.nonce = response.nonce
        version = response.version_info
        type_url = self.type_url
        decode = self.rtype.decode
        names = self.names
        wildcard = self.wildcard
        errors: list[str] = []  # reasons for resources we could not name
        invalid: dict[str, str] = {}  # name -> reason
        valid: list[ValidItem] = []
        bodiless: list[tuple[str, str, float | None]] = []
        seen: set[str] = set()
        duplicates: list[str] = []
        every_name_known = True
        max_name = self.options.max_name_length

        for index, packed in enumerate(response.resources):
            ttl: float | None = None
            wrapped_name = ""
            body_version: str | None = None
            if packed.type_url == type_url:
                raw = packed.value
            else:
                unwrapped = self._unwrap(index, packed, errors)
                if unwrapped is None:
                    every_name_known = False
                    continue
                wrapped_name, raw, ttl, body_version = unwrapped
                if raw is None:  # a body-less Resource (heartbeat) or one of another type
                    if wrapped_name in seen:
                        duplicates.append(wrapped_name)
                    seen.add(wrapped_name)
                    if body_version is None:
                        invalid[wrapped_name] = errors.pop()
                    else:
                        bodiless.append((wrapped_name, body_version, ttl))
                    continue
            name: str | None
            reason: str | None = None
            try:
                name, value = decode(raw)
            except ResourceDecodeError as exc:
                name, value, reason = wrapped_name or exc.name, None, exc.message
            except Exception as exc:
                name, value, reason = wrapped_name or None, None, f"decoder failed: {exc!r}"
            else:
                if wrapped_name and name != wrapped_name:
                    reason = f"the Resource wrapper names it {wrapped_name!r} but it is {name!r}"
                    name = wrapped_name
            if not name or len(name) > max_name:
                if name:
                    reason = name_too_long(name, max_name)
                errors.append(f"resource {index}: {reason}")
                every_name_known = False
                continue
            if name in seen:
                duplicates.append(name)
            seen.add(name)
            if reason is not None:
                invalid[name] = reason
            elif wildcard or name in names:
                # A Resource wrapper's own version is the resource's (heartbeats repeat it).
                valid.append((name, raw, value, body_version or version, ttl))

        if duplicates:
            for name in duplicates:
                invalid[name] = "duplicate resource name in one response"
            valid = [item for item in valid if item[0] not in invalid]
            bodiless = [item for item in bodiless if item[0] not in invalid]
        self.apply_valid(valid, now, events)
        for name, name_version, ttl in bodiless:
            wanted = name in names or wildcard
            if wanted and not self.refresh_ttl(name, name_version, ttl, now):
                self.apply_deletion(name, now, events)
        for name, reason in invalid.items():
            error = ResourceValidationError(type_url, name, reason)
            errors.append(str(error))
            if name in names or wildcard:
                self.apply_error(name, _INVALID, error, now, events)

        covered = self.apply_server_errors(response.resource_errors, now, events)
        only_heartbeats = bool(bodiless) and not valid and not invalid
        if self.rtype.all_resources_required_in_sotw and every_name_known and not only_heartbeats:
            # Full state: a resource seen before and absent now was deleted. One never seen may
            # simply not be in this response yet (the request naming it may be in flight).
            # A response of heartbeats alone refreshes TTLs; it is not a state of the world.
            for name in self.entries.keys() - seen - covered:
                status = self.entries[name].status
                if status.holds_value or status is _NACKED:
                    self.apply_deletion(name, now, events)

        if errors:
            message = nack_message(errors, self.options.max_nack_message_length)
            self.pending_acks.append(Ack(response.nonce, self.version_info, message))
        else:
            self.version_info = version
            self.pending_acks.append(Ack(response.nonce, version, None))

    def _unwrap(
        self, index: int, packed: Any, errors: list[str]
    ) -> tuple[str, bytes | None, float | None, str | None] | None:
        """Open a `Resource` wrapper: ``(name, body or None, ttl, its version or None)``.

        None (with a reason in ``errors``) when it cannot be attributed to a name. A named
        wrapper with a body of another type comes back with no body and no version, its reason
        last in ``errors``.
        """
        if packed.type_url != RESOURCE_WRAPPER_TYPE_URL:
            errors.append(
                f"resource {index}: type {packed.type_url or '(none)'} is not {self.type_url}"
            )
            return None
        try:
            wrapper = Resource.FromString(packed.value)
        except Exception as exc:
            errors.append(f"resource {index}: cannot parse the Resource wrapper: {exc}")
            return None
        name = wrapper.name
        ttl = duration_seconds(wrapper.ttl) if wrapper.HasField("ttl") else None
        if not wrapper.HasField("resource"):
            if not name:
                errors.append(f"resource {index}: a Resource with neither name nor body")
                return None
            return name, None, ttl, wrapper.version
        inner = wrapper.resource
        if inner.type_url != self.type_url:
            mismatch = f"type {inner.type_url or '(none)'} is not {self.type_url}"
            errors.append(mismatch if name else f"resource {index}: {mismatch}")
            return (name, None, ttl, None) if name else None
        return name, inner.value, ttl, wrapper.version
