"""The test control plane's VHDS and on-demand answers (Delta), as Envoy expects them.

Why apart from `_server_delta`: VHDS is not "send what is stored under the names asked for".
A client asks for ``<route configuration name>/<host>``; the server stores virtual hosts under
their own names (``<route configuration name>/<virtual host>``) and answers each host with the
virtual host whose domains match it (gRPC's and Envoy's domain rules), named by its own name
with the host in its ``aliases``. A host no virtual host matches is answered once with a
``Resource`` whose name and alias are the host and which has no body. When the route
configuration changes, every host asked for is answered again, found or not (Envoy: an update
of the route configuration clears the client's virtual host table). An on-demand cluster the
server does not have is named in ``removed_resources`` (what Envoy's on-demand CDS takes as
Missing).
"""

from __future__ import annotations

from typing import Any

from .._protocol._messages import DeltaDiscoveryResponse
from ..resources import ROUTE_CONFIGURATION, VIRTUAL_HOST, select_virtual_host, split_vhds_name
from ._store import ResourceStore

__all__ = ["vhds_response"]


def vhds_response(store: ResourceStore, sub: Any, nonce: Any) -> Any | None:
    """The VHDS response owed to a subscription (``sub.names`` the hosts asked for,
    ``sub.sent`` what each was answered with, ``sub.absent`` the hosts told they do not
    exist), or None; updates ``sub``. ``nonce()`` gives the response's nonce."""
    stored = store.of_type(VIRTUAL_HOST.type_url)
    response = DeltaDiscoveryResponse(type_url=VIRTUAL_HOST.type_url)
    for asked in sorted(sub.names):
        try:
            route_config, host = split_vhds_name(asked)
        except ValueError:
            continue
        match = _match(store, route_config, host)
        rc = store.get(ROUTE_CONFIGURATION.type_url, route_config)
        rc_version = rc.version if rc is not None else ""
        if match is None:
            version = f"{rc_version}/absent"
            if asked not in sub.absent or sub.sent.get(asked) != version:
                response.resources.add(name=asked, aliases=[asked])
                sub.absent.add(asked)
                sub.sent[asked] = version
            continue
        version = f"{rc_version}/{stored[match].version}"
        if sub.sent.get(asked) == version:
            continue
        resource = response.resources.add(
            name=match, version=stored[match].version, aliases=[asked]
        )
        resource.resource.CopyFrom(stored[match].packed)
        sub.sent[asked] = version
        sub.absent.discard(asked)
    if not response.resources:
        return None
    response.nonce = nonce()
    response.system_version_info = store.type_version(VIRTUAL_HOST.type_url)
    return response


def _match(store: ResourceStore, route_config: str, host: str) -> str | None:
    """The name of the stored virtual host of ``route_config`` that ``host`` selects."""
    prefix = route_config + "/"
    candidates = {
        name: VIRTUAL_HOST.decode(stored.packed.value)[1].virtual_host
        for name, stored in store.of_type(VIRTUAL_HOST.type_url).items()
        if name.startswith(prefix) and "/" not in name[len(prefix) :]
    }
    chosen = select_virtual_host(tuple(candidates.values()), host)
    if chosen is None:
        return None
    return next(name for name, vhost in candidates.items() if vhost is chosen)
