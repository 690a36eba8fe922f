"""A locality: where an endpoint (EDS) or the client itself (its bootstrap node) runs.

Why here, below the settings: EDS views, the load store and the node's configuration all name
localities; with it among the resource values, the settings build on the resources and never
the other way round.
"""

from __future__ import annotations

import attrs

__all__ = ["Locality"]


@attrs.frozen(kw_only=True)
class Locality:
    """Where endpoints (or the client, in its node) are: ``envoy.config.core.v3.Locality``."""

    region: str = ""
    zone: str = ""
    sub_zone: str = ""
