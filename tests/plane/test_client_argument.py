"""Both front ends refuse a ``client`` that is not an `XdsClient` with a TypeError naming it
(an AttributeError from deep inside the channel before)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from xdsclient.grpc import XdsChannel
from xdsclient.httpx import XdsTransport


@pytest.mark.parametrize(
    "make",
    [
        lambda client: XdsChannel("xds:///svc", client=client),
        lambda client: XdsTransport("edge", client=client),
    ],
    ids=["XdsChannel", "XdsTransport"],
)
def test_a_client_that_is_not_an_xds_client_is_refused(make: Callable[[Any], object]) -> None:
    """``client="nope"`` is a TypeError that names the value."""
    with pytest.raises(TypeError, match="client must be an XdsClient, not 'nope'"):
        make("nope")
