"""What the testing kit's own tests serve: one cluster ``c``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import cluster


@pytest.fixture
def cp_resources() -> list[Any]:
    """What ``cp`` serves: cluster ``c``."""
    return [cluster("c")]
