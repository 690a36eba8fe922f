"""The end-to-end fixtures (a control plane, a client per transport variant) for these tests too."""

from __future__ import annotations

from tests.client.conftest import client, control_plane, variant

__all__ = ["client", "control_plane", "variant"]
