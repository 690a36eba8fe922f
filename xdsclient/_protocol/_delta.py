"""Incremental (Delta) state for one resource type.

Why separate: Delta requests carry only what changed (subscribe / unsubscribe diffs), versions
are per resource, resources carry their own names, and deletion is explicit
(``removed_resources``, or a `Resource` with a name and no body).

Invariants (as Envoy's delta_subscription_state keeps them):
- Interest is three groups: explicitly requested names (``names``; their versions are those of
  their cache entries, none while waiting for the server), names received through the wildcard
  (cache entries outside ``names``), and ``ambiguous`` names, unsubscribed while the wildcard is
  on, that may still come to us through it.
- A remove-then-add before the request goes out is sent as a subscribe.
- The first request of a stream restates all interest and lists in ``initial_resource_versions``
  the version of every resource we hold, so the server can skip what we already have.
- A wildcard-only first request is the legacy empty subscribe list; ``*`` goes out explicitly as
  soon as explicit names are added to such a stream.
- ``system_version_info`` is kept for debugging only; it drives nothing.
"""

from __future__ import annotations

from typing import Any

from .._errors import ResourceDecodeError, ResourceValidationError
from .._names import WILDCARD
from ..resources._type import ResourceType
from ._cache import Table
from ._deadlines import Deadlines
from ._events import Event
from ._messages import DeltaDiscoveryRequest, Request
from ._options import ProtocolOptions
from ._status import Input
from ._typestate import (
    Ack,
    DeadlineKey,
    TypeState,
    ValidItem,
    duration_seconds,
    nack_message,
    name_too_long,
)

__all__ = ["DeltaTypeState"]

_INVALID = Input.INVALID
_ABSENT = object()


class DeltaTypeState(TypeState):
    """Subscription state, cache and ACK bookkeeping for one type over Delta."""

    def __init__(
        self,
        rtype: ResourceType[Any],
        options: ProtocolOptions,
        deadlines: Deadlines[DeadlineKey],
        entries: Table,
    ) -> None:
        super().__init__(rtype, options, deadlines, entries)
        self.ambiguous: set[str] = set()
        #: subscribed alias -> the name of the resource the server sent for it
        self.aliases: dict[str, str] = {}
        self.system_version_info = ""
        self._subscribe: dict[str, None] = {}
        self._unsubscribe: dict[str, None] = {}
        self._legacy_wildcard = False  # this stream's first request was the legacy empty list

    # ----------------------------------------------------------------- interest

    def _interest_added(self, name: str) -> None:
        # Re-adding a name whose unsubscription has not gone out nets to nothing.
        if self._unsubscribe.pop(name, _ABSENT) is _ABSENT:
            self._subscribe[name] = None
        self.ambiguous.discard(name)

    def _interest_removed(self, name: str, *, had_value: bool) -> None:
        # Dropping a name whose subscription has not gone out nets to nothing (no phantom
        # unsubscribe).
        if self._subscribe.pop(name, _ABSENT) is _ABSENT:
            self._unsubscribe[name] = None
        self.aliases.pop(name, None)
        if name == WILDCARD:
            self.ambiguous.clear()
        elif self.wildcard and had_value:
            self.ambiguous.add(name)

    def reset_stream(self) -> None:
        super().reset_stream()
        self._subscribe = {}
        self._unsubscribe = {}
        self._legacy_wildcard = False

    # ----------------------------------------------------------------- requests

    def initial_resource_versions(self) -> dict[str, str]:
        """Every resource we hold, by the name the server knows it by, with its version."""
        versions: dict[str, str] = {}
        for key, entry in self.entries.items():
            if entry.status.holds_value and entry.version is not None:
                versions[self.aliases.get(key, key)] = entry.version
        return versions

    def _build_requests(self) -> list[Request]:
        acks = self.pending_acks
        if not self.sent_on_stream:
            if not self.has_interest:
                return []
            subscribe = list(self.names)
            if self.wildcard:
                if subscribe:
                    subscribe.insert(0, WILDCARD)
                else:
                    self._legacy_wildcard = True
            first = DeltaDiscoveryRequest(
                type_url=self.type_url,
                resource_names_subscribe=subscribe,
                initial_resource_versions=self.initial_resource_versions(),
            )
            self._subscribe = {}
            self._unsubscribe = {}
            return [first]
        subscribe = list(self._subscribe)
        unsubscribe = list(self._unsubscribe)
        self._subscribe = {}
        self._unsubscribe = {}
        if self._legacy_wildcard and self.wildcard and any(n != WILDCARD for n in subscribe):
            # The server must not take explicit names as the end of our legacy wildcard.
            if WILDCARD not in subscribe:
                subscribe.insert(0, WILDCARD)
            self._legacy_wildcard = False
        if not acks:
            if not subscribe and not unsubscribe:
                return []
            return [
                DeltaDiscoveryRequest(
                    type_url=self.type_url,
                    resource_names_subscribe=subscribe,
                    resource_names_unsubscribe=unsubscribe,
                )
            ]
        requests = []
        for index, ack in enumerate(acks):
            request = DeltaDiscoveryRequest(type_url=self.type_url, response_nonce=ack.nonce)
            if index == 0:
                request.resource_names_subscribe.extend(subscribe)
                request.resource_names_unsubscribe.extend(unsubscribe)
            if ack.error is not None:
                request.error_detail.code = 3  # INVALID_ARGUMENT
                request.error_detail.message = ack.error
            requests.append(request)
        return requests

    # ----------------------------------------------------------------- responses

    def receive(self, response: Any, now: float, events: list[Event]) -> None:
        """Apply one DeltaDiscoveryResponse for this type and queue its ACK or NACK."""
        self.system_version_info = response.system_version_info
        type_url = self.type_url
        decode = self.rtype.decode
        names = self.names
        wildcard = self.wildcard
        entries = self.entries
        errors: list[str] = []
        invalid: dict[str, str] = {}
        valid: list[ValidItem] = []
        bodiless: list[tuple[str, str, float | None]] = []
        aliased: dict[str, list[str]] = {}  # resource name -> the subscribed aliases it serves
        seen: set[str] = set()
        duplicates: list[str] = []
        max_name = self.options.max_name_length
        for index, resource in enumerate(response.resources):
            name = resource.name
            if len(name) > max_name:
                errors.append(f"resource {index}: {name_too_long(name, max_name)}")
                continue
            if not name or name == WILDCARD:
                errors.append(
                    f"resource {index}: "
                    + (f"{name!r} is not a resource name" if name else "no name")
                )
                continue
            if name in seen:
                duplicates.append(name)
                continue
            seen.add(name)
            if resource.aliases:
                keys = self._alias_keys(name, resource.aliases)
                if not keys:
                    continue
                aliased[name] = keys
            elif not (wildcard or name in names):
                continue  # not requested: ignored, not even decoded
            ttl = duration_seconds(resource.ttl) if resource.HasField("ttl") else None
            if not resource.HasField("resource"):
                bodiless.append((name, resource.version, ttl))
                continue
            packed = resource.resource
            if packed.type_url != type_url:
                invalid[name] = f"type {packed.type_url or '(none)'} is not {type_url}"
                continue
            raw = packed.value
            entry = entries.get(name)
            if entry is not None and entry.raw == raw and entry.status.holds_value:
                value = entry.value  # unchanged: no need to decode it again
            else:
                try:
                    _, value = decode(raw)
                except ResourceDecodeError as exc:
                    invalid[name] = exc.message
                    continue
                except Exception as exc:
                    invalid[name] = f"decoder failed: {exc!r}"
                    continue
            valid.append((name, raw, value, resource.version, ttl))

        if duplicates:
            for name in duplicates:
                invalid[name] = "duplicate resource name in one response"
            valid = [item for item in valid if item[0] not in invalid]
            bodiless = [item for item in bodiless if item[0] not in invalid]
        if aliased:
            valid = self._expand_aliases(valid, aliased)
        self.apply_valid(valid, now, events)
        for name, version, ttl in bodiless:
            for key in aliased.get(name, (name,)):
                if not self.refresh_ttl(key, version, ttl, now):
                    self._remove(key, now, events)
        for name, reason in invalid.items():
            error = ResourceValidationError(type_url, name, reason)
            errors.append(str(error))
            for key in aliased.get(name, (name,) if name in names or wildcard else ()):
                self.apply_error(key, _INVALID, error, now, events)

        removed = list(response.removed_resources)
        removed.extend(item.name for item in response.removed_resource_names)
        for name in removed:
            self.ambiguous.discard(name)
            keys = (
                [k for k, target in self.aliases.items() if target == name] if self.aliases else []
            )
            if name in entries:
                keys.append(name)
            for key in keys:
                self._remove(key, now, events)

        self.apply_server_errors(response.resource_errors, now, events)
        message = nack_message(errors, self.options.max_nack_message_length) if errors else None
        self.pending_acks.append(Ack(response.nonce, "", message))

    def _alias_keys(self, name: str, aliases: Any) -> list[str]:
        """The cache keys a resource called ``name`` with these aliases updates."""
        names = self.names
        keys = [name] if name in names else []
        keys.extend(alias for alias in aliases if alias in names and alias != name)
        if not keys and self.wildcard:
            keys.append(name)
        return keys

    def _expand_aliases(
        self, valid: list[ValidItem], aliased: dict[str, list[str]]
    ) -> list[ValidItem]:
        expanded: list[ValidItem] = []
        for item in valid:
            keys = aliased.get(item[0])
            if keys is None:
                expanded.append(item)
                continue
            for key in keys:
                if key != item[0]:
                    self.aliases[key] = item[0]
                expanded.append((key, *item[1:]))
        return expanded

    def _remove(self, key: str, now: float, events: list[Event]) -> None:
        self.aliases.pop(key, None)
        self.apply_deletion(key, now, events)
