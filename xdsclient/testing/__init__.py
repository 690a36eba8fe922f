"""Test kit: a real xDS control plane on loopback, and what tests need around it."""

from __future__ import annotations

from ._control_plane import ControlPlane, ReceivedRequest, SentResponse

__all__ = ["ControlPlane", "ReceivedRequest", "SentResponse"]

for _cls in (ControlPlane, ReceivedRequest, SentResponse):
    _cls.__module__ = __name__
