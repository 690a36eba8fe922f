"""Proxyless gRPC: `XdsChannel`, a grpc.aio channel for generated stubs whose calls are routed,
retried, fault-injected, balanced and load-reported as the xDS configuration says, in Python.

Beside the client, as ``lb`` and the call path are: it builds on the public API, the call path
(`xdsclient._call`) and `xdsclient.lb`, and the client never imports it. `register_lb_policy`
(from `xdsclient.lb`, with the protocol a policy implements, `ChildPolicy`, and what its
``call_ended`` hook gets, `CallEnd`) plugs a Python load-balancing policy into the clusters
that name it (gRFC A52). See docs/proxyless-grpc.md for what gRPC does that it does and does
not do yet.
"""

from __future__ import annotations

from ..lb import CallEnd, ChildPolicy, LbPolicyFactory, register_lb_policy
from ._channel import XdsChannel

__all__ = ["CallEnd", "ChildPolicy", "LbPolicyFactory", "XdsChannel", "register_lb_policy"]

for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith(__name__ + "."):
        _value.__module__ = __name__
