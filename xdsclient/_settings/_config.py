"""Client configuration values: where the management servers are and how to talk to them.

Why values: the bootstrap loader, keyword arguments and tests all produce the same frozen
objects, validated once at construction, so the transport never second-guesses its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .._errors import XdsError
from .._names import OLD_AUTHORITY
from .._version import __version__
from ._validators import positive as _positive

if TYPE_CHECKING:
    from ._sources import Source

__all__ = [
    "AuthorityConfig",
    "Backoff",
    "BootstrapError",
    "ChannelCredentials",
    "ClientConfig",
    "Locality",
    "NodeConfig",
    "ServerConfig",
]

#: The server feature of gRFC A88's transient resource timer, as the gRFC's states and as
#: C-core's bootstrap name it.
_TRANSIENT_TIMER_FEATURES = frozenset(
    {"resource_timer_is_transient_failure", "resource_timer_is_transient_error"}
)

#: Client features this library implements, advertised in Node.client_features.
CLIENT_FEATURES = ("xds.config.resource-in-sotw", "xds.config.supports-resource-ttl")


class BootstrapError(XdsError):
    """The bootstrap configuration is invalid; the message names the offending field."""


@attrs.frozen(kw_only=True)
class Locality:
    """Where endpoints (or the client, in its node) are: ``envoy.config.core.v3.Locality``."""

    region: str = ""
    zone: str = ""
    sub_zone: str = ""


@attrs.frozen(kw_only=True)
class NodeConfig:
    """What the client tells the control plane about itself (``envoy.config.core.v3.Node``)."""

    id: str = ""
    cluster: str = ""
    metadata: dict[str, Any] = attrs.field(factory=dict, hash=False)
    locality: Locality | None = None
    user_agent_name: str = "xdsclient-python"
    user_agent_version: str = ""

    def to_proto(self) -> Any:
        """The Node message, with the client features we support."""
        from envoy.config.core.v3 import base_pb2

        node = base_pb2.Node(
            id=self.id,
            cluster=self.cluster,
            user_agent_name=self.user_agent_name,
            user_agent_version=self.user_agent_version or _version(),
            client_features=list(CLIENT_FEATURES),
        )
        if self.metadata:
            node.metadata.update(self.metadata)
        if self.locality is not None:
            node.locality.region = self.locality.region
            node.locality.zone = self.locality.zone
            node.locality.sub_zone = self.locality.sub_zone
        return node


@attrs.frozen(kw_only=True)
class ChannelCredentials:
    """How to secure the channel: ``insecure``, or ``tls`` with optional CA / client cert files."""

    type: Literal["insecure", "tls"] = "insecure"
    ca_certificate_file: str | None = None
    certificate_file: str | None = None
    private_key_file: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.certificate_file is None) != (self.private_key_file is None):
            raise BootstrapError("channel_creds: certificate_file and private_key_file go together")

    def __repr__(self) -> str:  # reprs end up in logs: name no file, show only the shape
        return f"ChannelCredentials(type={self.type!r}, mutual={self.certificate_file is not None})"


@attrs.frozen(kw_only=True, cache_hash=True)
class ServerConfig:
    """One management server: target URI, credentials and the server features it supports.

    Its hash is cached: the client routes every subscription through dicts keyed by server."""

    uri: str
    channel_credentials: ChannelCredentials = ChannelCredentials()
    server_features: frozenset[str] = frozenset()

    @property
    def ignore_resource_deletion(self) -> bool:
        """gRFC A53: keep resources the server deletes."""
        return "ignore_resource_deletion" in self.server_features

    @property
    def resource_timer_is_transient_failure(self) -> bool:
        """gRFC A88: the does-not-exist timer is 30 s and, when it fires, the resource is in
        status TIMEOUT with a transient error, not DOES_NOT_EXIST. Both spellings count:
        ``resource_timer_is_transient_failure`` (A88's states) and
        ``resource_timer_is_transient_error`` (the string gRPC C-core's bootstrap parses)."""
        return not self.server_features.isdisjoint(_TRANSIENT_TIMER_FEATURES)


@attrs.frozen(kw_only=True)
class Backoff:
    """Reconnect backoff, gRPC's defaults: 1 s, x1.6, +-20 % jitter, at most 120 s."""

    initial: float = attrs.field(default=1.0, validator=_positive)
    multiplier: float = attrs.field(default=1.6, validator=_positive)
    jitter: float = attrs.field(
        default=0.2, validator=attrs.validators.and_(attrs.validators.ge(0), attrs.validators.lt(1))
    )
    maximum: float = attrs.field(default=120.0, validator=_positive)

    def delay(self, attempt: int, uniform: float) -> float:
        """Seconds to wait before reconnect ``attempt`` (0-based); ``uniform`` is in [0, 1)."""
        # The attempt count grows for as long as the server stays away; past the cap the
        # exponent only overflows.
        base = self.initial * self.multiplier ** min(attempt, 64)
        base = min(base, self.maximum)
        return base * (1 + self.jitter * (2 * uniform - 1))


@attrs.frozen(kw_only=True)
class AuthorityConfig:
    """One entry of the bootstrap's ``authorities`` map (gRFC A47).

    ``servers`` in priority order (gRFC A71 fallback); empty means the top-level servers.
    ``client_listener_resource_name_template`` names the Listener for ``xds://{authority}/{target}``
    targets; None means ``xdstp://{authority}/envoy.config.listener.v3.Listener/%s``.
    """

    servers: tuple[ServerConfig, ...] = ()
    client_listener_resource_name_template: str | None = None


@attrs.frozen(kw_only=True)
class ClientConfig:
    """Everything the client needs to reach its management servers.

    ``servers`` serve old-style names and every authority without servers of its own, in
    priority order. ``authorities`` maps each xdstp authority the client may use to its
    configuration; a name whose authority is not there cannot be watched.
    """

    servers: tuple[ServerConfig, ...] = ()
    node: NodeConfig = NodeConfig()
    authorities: Mapping[str, AuthorityConfig] = attrs.field(factory=dict, hash=False)
    client_default_listener_resource_name_template: str = "%s"
    #: type URL -> a file or REST source serving that type instead of the servers
    sources: Mapping[str, Source] = attrs.field(factory=dict, hash=False)

    def servers_of(self, authority: str) -> tuple[ServerConfig, ...] | None:
        """The servers of an authority in priority order (`OLD_AUTHORITY`: the top-level
        ones), or None when the bootstrap does not configure it."""
        if authority == OLD_AUTHORITY:
            return self.servers
        config = self.authorities.get(authority)
        if config is None:
            return None
        return config.servers or self.servers


def _version() -> str:
    return __version__
