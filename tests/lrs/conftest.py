"""Fixtures for load reporting tests: the shell tests' fake transport and fake clock."""

from __future__ import annotations

from tests.shell.conftest import clock, fake

__all__ = ["clock", "fake"]
