"""Proxyless gRPC: `XdsChannel`, a grpc.aio channel for generated stubs whose calls are routed,
retried, fault-injected, balanced and load-reported as the xDS configuration says, in Python.

Beside the client, as ``lb`` and the call path are: it builds on the public API, the call path
(`xdsclient._call`) and `xdsclient.lb`, and the client never imports it. See
docs/proxyless-grpc.md for what gRPC does that it does and does not do yet.
"""

from __future__ import annotations

from ._channel import XdsChannel

__all__ = ["XdsChannel"]

for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith(__name__ + "."):
        _value.__module__ = __name__
