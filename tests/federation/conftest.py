"""Fixtures for federation tests: the end-to-end tests' variants and control plane, and the
shell tests' fake transport and clock."""

from __future__ import annotations

from tests.client.conftest import control_plane, variant
from tests.shell.conftest import clock, fake

__all__ = ["clock", "control_plane", "fake", "variant"]
