"""Fixtures for federation tests: every transport variant, the fake transport and clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.client.conftest import VARIANTS, Variant
from tests.shell.conftest import clock, fake
from xdsclient.testing import ControlPlane

__all__ = ["clock", "control_plane", "fake", "variant"]  # the shell tests' fake clock and transport


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> Variant:
    return Variant(ads=request.param["ads"], delta=request.param["delta"])


@pytest.fixture
async def control_plane() -> AsyncIterator[ControlPlane]:
    async with ControlPlane() as cp:
        yield cp
