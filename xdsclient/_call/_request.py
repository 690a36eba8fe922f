"""A call as data: what every decision of the call path reads, from either front end.

Why one value: routing (gRFC A28), fault injection (A33), the request hash (A42) and the
deadline (A31) all look at the same few facts of a call, and the gRPC channel and the HTTP
transport both produce them. The metadata keeps its order and repeated keys, as on the wire;
`CallRequest.headers` is the view gRPC's matchers see (C-core's ``XdsRouting::GetHeaderValue``):
names lower-case, repeated values joined with ``,``, every ``-bin`` header absent (gRPC never
matches or hashes binary headers, and grpc-go's balancers never see some of them), and
``content-type`` always ``application/grpc`` whatever the caller sent.

Times are on the caller's clock (the ``now`` every decision takes): ``deadline`` is absolute,
None for a call without one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

import attrs

from ..lb import header_map

__all__ = ["CallRequest", "LazyHeaderView", "grpc_header_view"]

_CONTENT_TYPE = "content-type"
_GRPC_CONTENT_TYPE = "application/grpc"


Metadata = tuple[tuple[str, str | bytes], ...]
"""(name, value) pairs; a ``-bin`` value may be bytes, as grpc.aio gives it."""


def _metadata(value: Iterable[tuple[str, str | bytes]]) -> Metadata:
    return value if isinstance(value, tuple) else tuple(value)


@attrs.frozen(kw_only=True)
class CallRequest:
    """One call: where it goes, what it carries, until when, and on which channel."""

    #: the channel's data-plane authority (the ``xds:///`` target's name, or the HTTP Host)
    authority: str
    #: ``/service/method`` for gRPC, the request path for HTTP
    path: str
    #: (name, value) pairs in the caller's order; a name may repeat
    metadata: Metadata = attrs.field(default=(), converter=_metadata)
    #: absolute, on the caller's clock; None: no deadline
    deadline: float | None = None
    #: the channel's id (gRFC A42 ``io.grpc.channel_id``): a random 64-bit value per channel
    channel_id: int = 0
    #: gRPC's header rules (``-bin`` absent, ``content-type`` fixed); False for plain HTTP,
    #: whose matchers see every header as sent (repeated values still joined with ``,``)
    grpc_rules: bool = True
    #: HTTP: the request's method (gRPC's is always POST)
    method: str = "POST"
    #: HTTP: ``http`` or ``https`` (for a redirect's Location)
    scheme: str = "http"
    #: HTTP: the caller's own address, for a ``source_ip`` hash policy (None: unknown)
    source_ip: str | None = None

    @functools.cached_property
    def headers(self) -> Mapping[str, str]:
        """The headers as the matchers see them (computed once, when first needed)."""
        return grpc_header_view(self.metadata, self.grpc_rules)


def grpc_header_view(metadata: Metadata, grpc_rules: bool = True) -> Mapping[str, str]:
    """The headers as gRPC's matchers see them (see the module's docstring): the pairs as
    `xdsclient.lb.header_map` reads them, plus the fixed ``content-type``; with ``grpc_rules``
    False, only lower-cased and joined. A value given as bytes is never matched."""
    if grpc_rules:  # lb's rules for metadata pairs, plus gRPC's fixed content-type
        joined = dict(header_map(metadata))
        joined[_CONTENT_TYPE] = _GRPC_CONTENT_TYPE
        return MappingProxyType(joined)
    joined = {}
    for name, value in metadata:
        if isinstance(value, str):
            key = name.lower()
            joined[key] = f"{joined[key]},{value}" if key in joined else value
    return MappingProxyType(joined)


class LazyHeaderView(Mapping[str, str]):
    """`grpc_header_view` of ``metadata``, built when first read: a pick is handed the view,
    and only a policy that reads headers (a custom one, ring hash hashing a header) pays for
    building it."""

    __slots__ = ("_metadata", "_view")

    def __init__(self, metadata: Metadata) -> None:
        self._metadata = metadata
        self._view: Mapping[str, str] | None = None

    def _built(self) -> Mapping[str, str]:
        view = self._view
        if view is None:
            view = self._view = grpc_header_view(self._metadata)
        return view

    def __getitem__(self, name: str) -> str:
        return self._built()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())

    def __repr__(self) -> str:
        return f"LazyHeaderView({dict(self._built())!r})"
