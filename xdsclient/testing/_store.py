"""The test control plane's resource store: what is served, at which versions.

Why its own part: the gRPC streams, the REST endpoint and `write_file` all serve the same
resources, and none of them may own them. Invariants:
- Versions come from one counter: every `set` gets a fresh version, and the type's version
  (SotW ``version_info``) becomes it; `remove` of a served name moves the type's version on too.
  So a type's version names one exact content of that type, which is what lets the encoder
  share a response's bytes among streams (`_encoding.py`).
- A replaced resource keeps its place in the type's order; a removed and re-added one goes last.
- Listeners hear of each change (the type URL) at once, or once per type at the end of a
  `batch`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

import attrs

from .._protocol._messages import DiscoveryResponse
from ._records import sotw_name

__all__ = ["ResourceStore", "Stored"]

_EMPTY: Mapping[str, Stored] = {}


@attrs.frozen
class Stored:
    """One served resource: its version, the packed message, and its TTL (seconds) or None.

    Its SotW encoding is made once, when it is set (``framed``: the ``Any`` as one
    ``DiscoveryResponse.resources`` entry, with ``log_name``, the name its record shows), so a
    response of N resources is a join of bytes, not N copies and N parses at request time."""

    version: str
    packed: Any  # google.protobuf.Any
    ttl: float | None
    framed: bytes = attrs.field(init=False, repr=False, eq=False)
    log_name: str = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # `DiscoveryResponse.resources` entry of a SotW response, encoded once: a response is
        # its header and a join of these
        framed = DiscoveryResponse(resources=[self.packed]).SerializeToString()
        object.__setattr__(self, "framed", framed)
        object.__setattr__(self, "log_name", sotw_name(self.packed))


class ResourceStore:
    """Resources by type URL and name, with versions, and listeners told of every change."""

    def __init__(self) -> None:
        self._resources: dict[str, dict[str, Stored]] = {}
        # name -> place in its type's order (kept by a replacement, lost by a removal)
        self._places: dict[str, dict[str, int]] = {}
        self._place = itertools.count()
        self._versions = itertools.count(1)
        self._type_versions: dict[str, str] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._batched: set[str] | None = None

    def listen(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(type_url)`` after each change of that type."""
        self._listeners.append(listener)

    def set(self, type_url: str, name: str, packed: Any, ttl: float | None = None) -> str:
        """Add or replace a resource; returns its new version."""
        version = str(next(self._versions))
        self._resources.setdefault(type_url, {})[name] = Stored(version, packed, ttl)
        self._places.setdefault(type_url, {}).setdefault(name, next(self._place))
        self._type_versions[type_url] = version
        self._changed(type_url)
        return version

    def remove(self, type_url: str, name: str) -> bool:
        """Delete a resource; whether it was served."""
        if self._resources.get(type_url, {}).pop(name, None) is None:
            return False
        del self._places[type_url][name]
        self._type_versions[type_url] = str(next(self._versions))
        self._changed(type_url)
        return True

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Tell the listeners once per changed type, when the block ends."""
        if self._batched is not None:
            yield
            return
        self._batched = set()
        try:
            yield
        finally:
            changed, self._batched = self._batched, None
            for type_url in sorted(changed):
                self._tell(type_url)

    def of_type(self, type_url: str) -> Mapping[str, Stored]:
        """The resources of a type, by name, in their order (read-only)."""
        return self._resources.get(type_url, _EMPTY)

    def select(self, type_url: str, names: Collection[str] | None) -> list[tuple[str, Stored]]:
        """The resources of a type among ``names`` (all with None), in the type's order; a
        few names among many resources cost only their own look-ups."""
        stored = self._resources.get(type_url, _EMPTY)
        if names is None:
            return list(stored.items())
        if len(names) * 8 >= len(stored):
            return [(name, s) for name, s in stored.items() if name in names]
        places = self._places[type_url]
        found = sorted((places[name], name) for name in names if name in stored)
        return [(name, stored[name]) for _, name in found]

    def get(self, type_url: str, name: str) -> Stored | None:
        """One resource, or None when it is not served."""
        return self._resources.get(type_url, _EMPTY).get(name)

    def type_version(self, type_url: str, default: str = "0") -> str:
        """The version of a type as a whole: that of its last change."""
        return self._type_versions.get(type_url, default)

    def snapshot(self, type_url: str, names: Collection[str] | None) -> tuple[Any, tuple[str, ...]]:
        """A SotW response of the resources named (every one with None) at the type's version,
        without a nonce, and the names it holds."""
        response = DiscoveryResponse(type_url=type_url, version_info=self.type_version(type_url))
        chosen = self.select(type_url, names)
        for _, stored in chosen:
            response.resources.append(stored.packed)
        return response, tuple(name for name, _ in chosen)

    def _changed(self, type_url: str) -> None:
        if self._batched is not None:
            self._batched.add(type_url)
        else:
            self._tell(type_url)

    def _tell(self, type_url: str) -> None:
        for listener in self._listeners:
            listener(type_url)
