"""Client configuration values: where the management servers are and how to talk to them.

Why values: the bootstrap loader, keyword arguments and tests all produce the same frozen
objects, validated once at construction, so the transport never second-guesses its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._names import OLD_AUTHORITY
from .._validators import positive as _positive
from .._version import __version__
from ..resources._locality import Locality
from ._certificates import CertificateProviderConfig
from ._servers import BootstrapError, ChannelCredentials, ServerConfig
from ._sources import Source

__all__ = [
    "AuthorityConfig",
    "Backoff",
    "BootstrapError",
    "CertificateProviderConfig",
    "ChannelCredentials",
    "ClientConfig",
    "Locality",
    "NodeConfig",
    "ServerConfig",
]

#: Client features this library implements, advertised in Node.client_features (the last one:
#: EDS ``overprovisioning_factor`` is not applied, gRFC A27; C-core sends it on every stream).
CLIENT_FEATURES = (
    "xds.config.resource-in-sotw",
    "xds.config.supports-resource-ttl",
    "envoy.lb.does_not_support_overprovisioning",
)


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
    #: the bootstrap's ``certificate_providers``: instance name -> its configuration (gRFC A29)
    certificate_providers: Mapping[str, CertificateProviderConfig] = attrs.field(
        factory=dict, hash=False
    )

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
