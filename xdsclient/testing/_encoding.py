"""Responses as bytes, each body encoded once and shared among the streams that need it.

Why: pushing one change to a thousand streams sends them the same resources; building and
serializing the same message a thousand times was most of the server's work. A response is
its body (type, version, resources; Delta: removals too) plus a nonce of its own stream, and
protobuf merges concatenated encodings field by field, so the body's bytes are encoded once per
(type, type version, names) - the store's versions make that key name one content - and each
stream appends its nonce's few bytes. A SotW body is itself a join: each resource was encoded
as a response entry when it was set (`Stored.framed`), so a response of N resources costs no
per-resource protobuf work when it is asked for (a full load's first response included).

When the faults may change a response on its way out (`Faults.mangles`), each message is built,
mangled and serialized on its own, as a misbehaving server would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._protocol._messages import DeltaDiscoveryResponse, DiscoveryResponse, Resource
from ._faults import Faults
from ._records import sotw_name
from ._store import Stored

__all__ = ["Encoded", "Encoder"]

_CACHE_LIMIT = 4096


@attrs.frozen
class Encoded:
    """A response ready to write, and the names its record shows."""

    data: bytes
    type_url: str  #: as sent (a fault may have changed it)
    nonce: str
    names: tuple[str, ...]
    removed: tuple[str, ...] = ()


class Encoder:
    """Builds responses as bytes, sharing bodies among streams; applies `Faults.mangle`."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults
        self._bodies: dict[tuple[Any, ...], Encoded] = {}

    def sotw(
        self, type_url: str, version: str, entries: Sequence[tuple[str, Stored]], nonce: str
    ) -> Encoded:
        """A SotW response of these resources at the type's ``version``."""
        if self._faults.mangles:
            return self.message(_sotw_message(type_url, version, entries, nonce), delta=False)
        key = ("sotw", type_url, version, tuple(name for name, _ in entries))
        body = self._bodies.get(key)
        if body is None:
            names = tuple(name if s.ttl is not None else s.log_name for name, s in entries)
            body = self._keep(
                key, Encoded(_sotw_body(type_url, version, entries), type_url, "", names)
            )
        return attrs.evolve(body, data=body.data + _nonce(DiscoveryResponse, nonce), nonce=nonce)

    def delta(
        self,
        type_url: str,
        version: str,
        changed: Sequence[tuple[str, Stored]],
        removed: Sequence[str],
        absent: Sequence[str],
        nonce: str,
    ) -> Encoded:
        """A Delta response: ``changed`` resources, ``removed`` names, ``absent`` names sent as
        body-less resources (they do not exist)."""
        if self._faults.mangles:
            message = _delta_message(type_url, version, changed, removed, absent, nonce)
            return self.message(message, delta=True)
        key = ("delta", type_url, version, tuple(n for n, _ in changed), (*removed,), (*absent,))
        body = self._bodies.get(key)
        if body is None:
            message = _delta_message(type_url, version, changed, removed, absent, "")
            names = (*(name for name, _ in changed), *absent)
            encoded = Encoded(message.SerializeToString(), type_url, "", names, tuple(removed))
            body = self._keep(key, encoded)
        data = body.data + _nonce(DeltaDiscoveryResponse, nonce)
        return attrs.evolve(body, data=data, nonce=nonce)

    def message(self, response: Any, *, delta: bool) -> Encoded:
        """Any response message as given (raw ones, heartbeats), after the faults' mangling."""
        if self._faults.mangles:
            self._faults.mangle(response, delta=delta)
        if delta:
            names = tuple(r.name for r in response.resources)
            removed = tuple(response.removed_resources)
        else:
            names = tuple(sotw_name(packed) for packed in response.resources)
            removed = ()
        data = response.SerializeToString()
        return Encoded(data, response.type_url, response.nonce, names, removed)

    def _keep(self, key: tuple[Any, ...], body: Encoded) -> Encoded:
        if len(self._bodies) >= _CACHE_LIMIT:
            self._bodies.clear()
        self._bodies[key] = body
        return body


def _nonce(message_class: Any, nonce: str) -> bytes:
    data: bytes = message_class(nonce=nonce).SerializeToString() if nonce else b""
    return data


def _sotw_body(type_url: str, version: str, entries: Sequence[tuple[str, Stored]]) -> bytes:
    """A SotW response without a nonce: its header, then each resource's bytes as made when it
    was set (`Stored.framed`; one wrapped in a TTL ``Resource`` is packed here)."""
    header: bytes = DiscoveryResponse(type_url=type_url, version_info=version).SerializeToString()
    if all(stored.ttl is None for _, stored in entries):
        return header + b"".join([stored.framed for _, stored in entries])
    data: bytes = _sotw_message(type_url, version, entries, "").SerializeToString()
    return data


def _sotw_message(
    type_url: str, version: str, entries: Sequence[tuple[str, Stored]], nonce: str
) -> Any:
    response = DiscoveryResponse(type_url=type_url, version_info=version, nonce=nonce)
    for name, stored in entries:
        if stored.ttl is None:
            response.resources.append(stored.packed)
        else:
            wrapper = Resource(name=name, version=stored.version, resource=stored.packed)
            wrapper.ttl.FromNanoseconds(int(stored.ttl * 1e9))
            response.resources.add().Pack(wrapper)
    return response


def _delta_message(
    type_url: str,
    version: str,
    changed: Sequence[tuple[str, Stored]],
    removed: Sequence[str],
    absent: Sequence[str],
    nonce: str,
) -> Any:
    response = DeltaDiscoveryResponse(
        type_url=type_url, nonce=nonce, system_version_info=version, removed_resources=removed
    )
    for name, stored in changed:
        resource = response.resources.add(name=name, version=stored.version)
        resource.resource.CopyFrom(stored.packed)
        if stored.ttl is not None:
            resource.ttl.FromNanoseconds(int(stored.ttl * 1e9))
    for name in absent:
        response.resources.add(name=name)
    return response
