"""Fixtures for federation tests: the end-to-end tests' variants (the control plane, fake
transport and clock are the suite's, in tests/conftest.py)."""

from __future__ import annotations

from tests.client.conftest import variant

__all__ = ["variant"]
