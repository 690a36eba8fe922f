"""Suite-wide settings, and the fixtures every part of the suite shares (one definition each).

- ``cp`` (also ``control_plane``, the name the end-to-end tests use): the embedded test control
  plane on 127.0.0.1, the pytest plugin's own ``xds_control_plane``, serving ``cp_resources``.
- ``cp_resources``: what ``cp`` serves from the start; nothing here. A directory's conftest or a
  test module overrides it with its resources.
- ``clock`` and ``fake``: a `FakeClock` and a `FakeTransport`, for tests in which nothing waits
  on real time or touches a socket.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from xdsclient.testing import ControlPlane, FakeClock, FakeTransport

# grpc's C core logs connection churn at INFO; tests provoke plenty of it on purpose.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@pytest.fixture
def cp_resources() -> list[Any]:
    """The resources ``cp`` serves from the start (override it to serve some)."""
    return []


@pytest.fixture
def cp(xds_control_plane: ControlPlane, cp_resources: list[Any]) -> ControlPlane:
    """The embedded control plane, serving ``cp_resources``; stopped after the test."""
    xds_control_plane.set_all(cp_resources)
    return xds_control_plane


@pytest.fixture
def control_plane(cp: ControlPlane) -> ControlPlane:
    """``cp``, under the name the end-to-end tests use."""
    return cp


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when the test advances it."""
    return FakeClock()


@pytest.fixture
def fake() -> FakeTransport:
    """An in-memory transport: the test plays the server through its streams."""
    return FakeTransport()
