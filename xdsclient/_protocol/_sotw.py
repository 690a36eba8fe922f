"""State-of-the-World state for one resource type.

Why separate: SotW requests restate the whole interest every time, carry a per-type version and
the last nonce, and SotW responses name resources only inside their bodies (or a `Resource`
wrapper); LDS/CDS responses are the full state, so absence means deletion.

Invariants (grpc-go's ads_stream.go says the same):
- ``version_info`` is the last *accepted* version of the type. It survives a broken stream and
  is sent on the first request of the next one; a NACK carries it unchanged.
- ``nonce`` is the last nonce received on the current stream; a new stream starts with none.
- Wildcard: when the wildcard is the only interest and no explicit name went out on this stream,
  the request is the legacy empty list; otherwise ``*`` is sent explicitly beside the names.
"""

from __future__ import annotations

from typing import Any

from .._errors import ResourceValidationError
from .._names import RESOURCE_WRAPPER_TYPE_URL, WILDCARD
from ..resources._type import ResourceType
from ._deadlines import Deadlines
from ._events import Event
from ._messages import DiscoveryRequest, Request, Resource
from ._options import ProtocolOptions
from ._status import Input, ResourceStatus
from ._typestate import Ack, DeadlineKey, TypeState, duration_seconds, nack_message

__all__ = ["SotwTypeState"]

_NACKED = ResourceStatus.NACKED
_INVALID = Input.INVALID


class SotwTypeState(TypeState):
    """Subscription state, cache and ACK bookkeeping for one type over SotW."""

    def __init__(
        self, rtype: ResourceType[Any], options: ProtocolOptions, deadlines: Deadlines[DeadlineKey]
    ) -> None:
        super().__init__(rtype, options, deadlines)
        self.version_info = ""
        self.nonce = ""
        self._explicit_sent = False

    def reset_stream(self) -> None:
        super().reset_stream()
        self.nonce = ""
        self._explicit_sent = False

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
        type_url = self.type_url
        decode = self.decode
        errors: list[str] = []
        invalid: dict[str, str] = {}
        valid: list[tuple[str, bytes, Any, float | None]] = []
        bodiless: list[tuple[str, str, float | None]] = []
        seen: dict[str, int] = {}
        every_name_known = True

        for index, packed in enumerate(response.resources):
            raw = packed.value
            ttl: float | None = None
            wrapped_name = ""
            if packed.type_url != type_url:
                if packed.type_url != RESOURCE_WRAPPER_TYPE_URL:
                    errors.append(
                        f"resource {index}: type {packed.type_url or '(none)'} is not {type_url}"
                    )
                    every_name_known = False
                    continue
                try:
                    wrapper = Resource.FromString(raw)
                except Exception as exc:
                    errors.append(f"resource {index}: cannot parse the Resource wrapper: {exc}")
                    every_name_known = False
                    continue
                wrapped_name = wrapper.name
                if wrapper.HasField("ttl"):
                    ttl = duration_seconds(wrapper.ttl)
                if not wrapper.HasField("resource"):
                    if not wrapped_name:
                        errors.append(f"resource {index}: a Resource with neither name nor body")
                        every_name_known = False
                        continue
                    seen[wrapped_name] = seen.get(wrapped_name, 0) + 1
                    bodiless.append((wrapped_name, wrapper.version, ttl))
                    continue
                if wrapper.resource.type_url != type_url:
                    mismatch = f"type {wrapper.resource.type_url or '(none)'} is not {type_url}"
                    if wrapped_name:
                        seen[wrapped_name] = seen.get(wrapped_name, 0) + 1
                        invalid[wrapped_name] = mismatch
                    else:
                        errors.append(f"resource {index}: {mismatch}")
                        every_name_known = False
                    continue
                raw = wrapper.resource.value
            decoded_name, value, reason = decode(raw)
            name = decoded_name
            if wrapped_name:
                if decoded_name is not None and reason is None and decoded_name != wrapped_name:
                    reason = (
                        f"the Resource wrapper names it {wrapped_name!r} but it is {decoded_name!r}"
                    )
                name = wrapped_name
            if name is None:
                errors.append(f"resource {index}: {reason}")
                every_name_known = False
                continue
            seen[name] = seen.get(name, 0) + 1
            if reason is not None:
                invalid[name] = reason
            else:
                valid.append((name, raw, value, ttl))

        if len(seen) < len(valid) + len(invalid) + len(bodiless):
            for name, count in seen.items():
                if count > 1:
                    invalid[name] = "duplicate resource name in one response"

        version = response.version_info
        names = self.names
        wildcard = self.wildcard
        apply_valid = self.apply_valid
        for name, raw, value, ttl in valid:
            if (name in names or wildcard) and name not in invalid:
                apply_valid(name, raw, value, version, now, ttl, events)
        for name, name_version, ttl in bodiless:
            wanted = (name in names or wildcard) and name not in invalid
            if wanted and not self.refresh_ttl(name, name_version, ttl, now):
                self.apply_deletion(name, now, events)
        for name, reason in invalid.items():
            error = ResourceValidationError(type_url, name, reason)
            errors.append(str(error))
            if name in names or wildcard:
                self.apply_error(name, _INVALID, error, now, events)

        covered = self.apply_server_errors(response.resource_errors, now, events)
        if self.rtype.all_resources_required_in_sotw and every_name_known:
            # Full state: a resource seen before and absent now was deleted. One never seen may
            # simply not be in this response yet (the request naming it may be in flight).
            for name in [
                n for n, e in self.entries.items() if e.status.holds_value or e.status is _NACKED
            ]:
                if name not in seen and name not in covered:
                    self.apply_deletion(name, now, events)

        if errors:
            message = nack_message(errors, self.options.max_nack_message_length)
            self.pending_acks.append(Ack(response.nonce, self.version_info, message))
        else:
            self.version_info = version
            self.pending_acks.append(Ack(response.nonce, version, None))
