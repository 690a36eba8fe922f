"""Names with a protocol meaning.

Why: one place for the strings every layer compares; a typo in one of them is silent on the wire.
The type URLs of resource types come from their `ResourceType`, derived from the protobuf
descriptor, so they are not repeated here.
"""

from __future__ import annotations

__all__ = ["RESOURCE_WRAPPER_TYPE_URL", "WILDCARD"]

#: Resources wrapped in ``envoy.service.discovery.v3.Resource`` inside a SotW response.
RESOURCE_WRAPPER_TYPE_URL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

#: The explicit wildcard subscription name.
WILDCARD = "*"
