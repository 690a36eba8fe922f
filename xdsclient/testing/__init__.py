"""Test kit: a real xDS control plane on loopback, and what tests need around it."""

from __future__ import annotations

from ._bootstraps import bootstrap
from ._control_plane import ControlPlane, ListenError, ReceivedRequest, SentResponse
from ._demo_config import assignment, changing_endpoints, demo_resources
from ._fake_clock import FakeClock
from ._fake_transport import FakeStream, FakeTransport
from ._lrs_server import LoadReportingServer, ReceivedLoadReport
from ._recorder import ProtocolRecorder
from ._seeded import SeededBug

__all__ = [
    "ControlPlane",
    "FakeClock",
    "FakeStream",
    "FakeTransport",
    "ListenError",
    "LoadReportingServer",
    "ProtocolRecorder",
    "ReceivedLoadReport",
    "ReceivedRequest",
    "SeededBug",
    "SentResponse",
    "assignment",
    "bootstrap",
    "changing_endpoints",
    "demo_resources",
]

for _cls in (
    ControlPlane,
    FakeClock,
    FakeStream,
    FakeTransport,
    ListenError,
    LoadReportingServer,
    ProtocolRecorder,
    ReceivedLoadReport,
    ReceivedRequest,
    SentResponse,
):
    _cls.__module__ = __name__
