"""Clients of the server under test, made the same way for the plugin's ``xds_client`` and for
its ``xds_client_factory``: one node id and metadata per client, the variant's transport, and
every client closed at teardown.

Why a factory: a control plane that selects resources by node (tenants, zones, canaries) is
tested with several clients that differ only in their node; each test otherwise repeats the
client construction, its bootstrap handling and the cleanup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .._client import XdsClient

__all__ = ["ClientFactory", "make_client"]

#: variant name -> (ads, delta)
VARIANTS: dict[str, tuple[bool, bool]] = {
    "ads-sotw": (True, False),
    "ads-delta": (True, True),
    "xds-sotw": (False, False),
    "xds-delta": (False, True),
}


def make_client(
    *,
    server: str | None,
    bootstrap: str | None,
    variant: str,
    node_id: str | None,
    metadata: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> XdsClient:
    """A client (not started) of ``server``, or of the bootstrap's servers; ``node_id`` and
    ``metadata`` override the bootstrap's node (metadata merged over its own)."""
    from .._client import XdsClient
    from .._settings._bootstrap import load_bootstrap
    from .._settings._config import NodeConfig

    ads, delta = VARIANTS[variant]
    if server is not None:
        node = NodeConfig(id=node_id or "", metadata=dict(metadata or {}))
        return XdsClient(server, node=node, ads=ads, delta=delta, **options)
    assert bootstrap is not None, "a server or a bootstrap"
    config = load_bootstrap(bootstrap)
    node = attrs.evolve(
        config.node,
        id=config.node.id if node_id is None else node_id,
        metadata={**config.node.metadata, **(metadata or {})},
    )
    config = attrs.evolve(config, node=node)
    return XdsClient(bootstrap=config, ads=ads, delta=delta, **options)


class ClientFactory:
    """``await xds_client_factory(node_id=..., metadata=...)``: a started client of the server
    under test, in the test's variant; every client it made is closed at teardown.

    ``node_id`` defaults to the plugin's (``--xds-node-id``; the bootstrap's node with
    ``--xds-bootstrap``); further keywords go to `XdsClient` (``options=ClientOptions(...)``).
    """

    def __init__(
        self, *, server: str | None, bootstrap: str | None, variant: str, node_id: str
    ) -> None:
        self._server = server
        self._bootstrap = bootstrap
        self._variant = variant
        self._node_id = node_id
        #: every client made, in order
        self.clients: list[XdsClient] = []

    async def __call__(
        self,
        *,
        node_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> XdsClient:
        default = self._node_id if self._bootstrap is None else None
        client = make_client(
            server=self._server,
            bootstrap=self._bootstrap,
            variant=self._variant,
            node_id=default if node_id is None else node_id,
            metadata=metadata,
            options=options,
        )
        await client.start()
        self.clients.append(client)
        return client

    async def aclose(self) -> None:
        """Close every client made (each once; closing a closed client does nothing)."""
        for client in self.clients:
            await client.close()
