"""Data-plane targets -> Listener resource names, as gRPC's xds resolver derives them (gRFC A47).

Why here: `watch_config("svc")` must subscribe to the same Listener a gRPC channel to
``xds:///svc`` would, so Python and gRPC services of one mesh read one configuration:
- an xdstp:// name is used as it is;
- ``xds://{authority}/{target}`` uses that authority's ``client_listener_resource_name_template``
  (default ``xdstp://{authority}/envoy.config.listener.v3.Listener/%s``);
- a plain target (or ``xds:///target``) uses the top-level
  ``client_default_listener_resource_name_template`` (default ``%s``).
The virtual host is chosen by the target itself (the URI path without its leading ``/``).

As in C-core, the target's path is percent-decoded before the template encodes it again
(``xds:///a%20b`` and a target ``a b`` name one listener, ``.../a%20b``).
"""

from __future__ import annotations

import urllib.parse

from .._xdstp import XDSTP_SCHEME, encode_authority, expand_template, is_xdstp
from ._config import BootstrapError, ClientConfig

__all__ = ["listener_for"]

_LISTENER_TYPE = "envoy.config.listener.v3.Listener"


def listener_for(config: ClientConfig, target: str) -> tuple[str, str]:
    """``(listener resource name, data-plane authority)`` for a target; raises
    `BootstrapError` when the target names an authority the bootstrap does not configure."""
    if is_xdstp(target):
        return target, target
    if not target.startswith("xds:"):
        return expand_template(config.client_default_listener_resource_name_template, target), (
            target
        )
    uri = urllib.parse.urlsplit(target)
    raw_path = uri.path.removeprefix("/")
    path = urllib.parse.unquote(raw_path)
    if not path:
        raise ValueError(f"{target!r} names no service (xds://[authority]/service)")
    if not uri.netloc:
        template = config.client_default_listener_resource_name_template
        return expand_template(template, path), raw_path
    authority = urllib.parse.unquote(uri.netloc)
    entry = config.authorities.get(authority)
    if entry is None:
        raise BootstrapError(
            f"{target!r}: the bootstrap does not configure the authority {authority!r}"
        )
    template = entry.client_listener_resource_name_template or (
        f"{XDSTP_SCHEME}{encode_authority(authority)}/{_LISTENER_TYPE}/%s"
    )
    return expand_template(template, path), raw_path
