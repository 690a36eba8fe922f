"""Test kit: a real xDS control plane on loopback, and what tests need around it."""

from __future__ import annotations

from ._bootstraps import bootstrap
from ._control_plane import ControlPlane, ListenError, ReceivedRequest, SentResponse
from ._demo_config import assignment, changing_endpoints, demo_resources
from ._fake_clock import FakeClock
from ._fake_transport import FakeStream, FakeTransport
from ._http_backends import Behaviour, HttpBackend, SeenRequest, http_backends
from ._lrs_server import LoadReportingServer, ReceivedLoadReport
from ._recorder import ProtocolRecorder
from ._seeded import SeededBug

__all__ = [
    "Behaviour",
    "ControlPlane",
    "FakeClock",
    "FakeStream",
    "FakeTransport",
    "HttpBackend",
    "ListenError",
    "LoadReportingServer",
    "ProtocolRecorder",
    "ReceivedLoadReport",
    "ReceivedRequest",
    "SeededBug",
    "SeenRequest",
    "SentResponse",
    "assignment",
    "bootstrap",
    "changing_endpoints",
    "demo_resources",
    "http_backends",
]

for _cls in (
    Behaviour,
    ControlPlane,
    FakeClock,
    FakeStream,
    FakeTransport,
    HttpBackend,
    ListenError,
    LoadReportingServer,
    ProtocolRecorder,
    ReceivedLoadReport,
    ReceivedRequest,
    SeenRequest,
    SentResponse,
):
    _cls.__module__ = __name__
