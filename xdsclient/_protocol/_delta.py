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

from collections.abc import Iterable
from typing import Any

from .._names import WILDCARD
from ._classify import ValidItem, key_of
from ._events import Event
from ._messages import DeltaDiscoveryRequest, Request
from ._typestate import Ack, TypeState, duration_seconds

__all__ = ["DeltaTypeState"]

_ABSENT = object()


class DeltaTypeState(TypeState):
    """Subscription state, cache and ACK bookkeeping for one type over Delta."""

    def _init_variant(self) -> None:
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
        """Every resource we hold from this server, by the name it knows it by, with its version
        (a version adopted from another server means nothing here)."""
        versions: dict[str, str] = {}
        adopted = self.adopted
        for key, entry in self.entries.items():
            if entry.status.holds_value and entry.version is not None and key not in adopted:
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

        def answer(index: int, ack: Ack) -> Request:
            request = DeltaDiscoveryRequest(type_url=self.type_url, response_nonce=ack.nonce)
            if index == 0:  # the interest change rides on the first answer
                request.resource_names_subscribe.extend(subscribe)
                request.resource_names_unsubscribe.extend(unsubscribe)
            return request

        return self.answers(answer)

    # ----------------------------------------------------------------- responses

    def receive(
        self, response: Any, now: float, events: list[Event], raw: bytes | None = None
    ) -> None:
        """Apply one DeltaDiscoveryResponse for this type and queue its ACK or NACK (``raw``,
        its bytes, is not read: Delta names each resource on its message)."""
        self.system_version_info = response.system_version_info
        type_url = self.type_url
        names = self.names
        wildcard = self.wildcard
        classified = self.classifier()
        aliased: dict[str, list[str]] = {}  # resource name -> the subscribed aliases it serves
        named = classified.named
        body = classified.body
        for index, resource in enumerate(response.resources):
            name = named(index, resource.name)
            if not name:
                continue
            if resource.aliases:
                served = self._alias_keys(name, resource.aliases)
                if not served:
                    continue
                aliased[name] = served
            elif not (wildcard or name in names):
                continue  # not requested: ignored, not even decoded
            ttl = duration_seconds(resource.ttl) if resource.HasField("ttl") else None
            if not resource.HasField("resource"):
                classified.bodiless.append((name, resource.version, ttl))
            elif (packed := resource.resource).type_url != type_url:
                classified.invalid[name] = f"type {packed.type_url or '(none)'} is not {type_url}"
            else:
                body(index, packed.value, resource.version, ttl, name)
        classified.finish()
        if classified.invalid:
            invalid = classified.invalid
            classified.versions = {
                key: r.version
                for r in response.resources
                if (key := key_of(r.name, type_url)) in invalid
            }
        if aliased:
            classified.valid = self._expand_aliases(classified.valid, aliased)

        def keys(name: str) -> Iterable[str]:
            return aliased.get(name) or ((name,) if wildcard or name in names else ())

        self.apply_classified(classified, keys, now, events)
        if self.adopted:
            self.adopted.difference_update([item[0] for item in classified.valid])
        classified.release()
        self._apply_removals(response, now, events)
        self.apply_server_errors(response.resource_errors, now, events)
        self.answer(response.nonce, classified.errors, "")

    def _apply_removals(self, response: Any, now: float, events: list[Event]) -> None:
        removed = list(response.removed_resources)
        removed.extend([item.name for item in response.removed_resource_names])
        for name in [key_of(name, self.type_url) for name in removed]:
            self.ambiguous.discard(name)
            keys = (
                [k for k, target in self.aliases.items() if target == name] if self.aliases else []
            )
            if name in self.entries:
                keys.append(name)
            for key in keys:
                self.remove(key, now, events)

    def _alias_keys(self, name: str, aliases: Any) -> list[str]:
        """The cache keys a resource called ``name`` with these aliases updates."""
        names, type_url = self.names, self.type_url
        keys = [name] if name in names else []
        for alias in aliases:
            key = key_of(alias, type_url)
            if key in names and key != name:
                keys.append(key)
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

    def remove(self, key: str, now: float, events: list[Event]) -> None:
        self.aliases.pop(key, None)
        super().remove(key, now, events)
