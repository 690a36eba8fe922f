"""Where a resource type comes from besides gRPC: a watched file or a REST-JSON endpoint.

Why values like `ServerConfig`: the client routes each type to a source the way it routes a
name to a management server, and keys its channels by them; frozen values compare and hash.
Envoy's ``ConfigSource`` has the same three shapes (``path_config_source``, ``api_config_source``
with ``api_type: REST`` or gRPC); `ClientConfig.sources` maps a type URL to one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from .._validators import positive as _positive
from ._servers import ChannelCredentials, ServerConfig

__all__ = ["FileSource", "RestSource", "Source"]


def _pairs(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(dict(headers).items())


@attrs.frozen(kw_only=True)
class FileSource:
    """A file holding one ``DiscoveryResponse`` (Envoy's ``path_config_source``).

    The format follows the extension, as in Envoy: ``.pb`` binary, ``.pb_text`` / ``.textproto``
    text format, ``.json``, ``.yaml`` / ``.yml``. The file is the state of the world for its
    type: a resource absent from it does not exist. Replace it by an atomic move (write a
    temporary file, then rename) to update it. With ``watched_directory`` (Envoy's field of the
    same name), any change in that directory re-reads the file: the Kubernetes ConfigMap
    symlink swap.
    """

    path: str
    watched_directory: str | None = None

    @property
    def uri(self) -> str:
        """How the client names this source where it names a server: ``file://`` and the path."""
        return f"file://{self.path}"


@attrs.frozen(kw_only=True)
class RestSource:
    """A REST-JSON endpoint (Envoy's ``api_config_source`` with ``api_type: REST``).

    The client POSTs each ``DiscoveryRequest`` as proto3 JSON to
    ``{url}/v3/discovery:{listeners|routes|clusters|endpoints|...}``, one at a time, and polls
    again ``refresh_delay`` seconds after each response (a long-polling server may hold the
    request until something changes). ``request_timeout`` bounds one request. ``headers`` go on
    every request (authorization tokens; never logged). ``https://`` URLs use
    ``channel_credentials`` (``tls``, with optional CA and client certificate files).
    """

    url: str
    refresh_delay: float = attrs.field(default=1.0, validator=_positive)
    request_timeout: float = attrs.field(default=1.0, validator=_positive)
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs)
    channel_credentials: ChannelCredentials = attrs.field(factory=ChannelCredentials)

    @property
    def uri(self) -> str:
        """How the client names this source where it names a server: the URL."""
        return self.url

    def __repr__(self) -> str:  # headers hold credentials: show their names only
        names = ", ".join(name for name, _ in self.headers)
        return f"RestSource(url={self.url!r}, headers=[{names}])"


#: Where one resource type is served from.
Source = ServerConfig | FileSource | RestSource
