"""The end-to-end fixtures (a client per transport variant) for these tests too; the control
plane is the suite's."""

from __future__ import annotations

from tests.client.conftest import client, variant

__all__ = ["client", "variant"]
