"""`XdsClient.wait_for`: the first value satisfying a predicate, against the real control plane."""

from __future__ import annotations

import asyncio

import pytest

from xdsclient import ClientClosedError, WaitTimeoutError, XdsClient, XdsError
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane, builders


async def test_wait_for_returns_a_cached_value_without_a_predicate(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(builders.cluster("a"))
    view = await client.wait_for(CLUSTER, "a", timeout=5)
    assert view.name == "a"


async def test_wait_for_skips_values_until_the_predicate_holds(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(builders.cluster_load_assignment("a", [("10.0.0.1", 80)]))
    waiting = asyncio.create_task(
        client.wait_for(
            ENDPOINT, "a", lambda view: len(view.priorities[0][0].endpoints) == 2, timeout=5
        )
    )
    await client.wait_for(ENDPOINT, "a", timeout=5)
    assert not waiting.done()
    control_plane.set(builders.cluster_load_assignment("a", [("10.0.0.1", 80), ("10.0.0.2", 80)]))
    view = await waiting
    assert len(view.priorities[0][0].endpoints) == 2


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_raises_a_timeout_naming_the_last_event(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set(builders.cluster("a", connect_timeout=1))
    with pytest.raises(WaitTimeoutError, match="'a' did not satisfy") as raised:
        await client.wait_for(CLUSTER, "a", lambda view: False, timeout=0.3)
    assert isinstance(raised.value, XdsError)
    assert isinstance(raised.value, TimeoutError)
    assert "ResourceChanged" in str(raised.value)


@pytest.mark.parametrize("variant", [{"ads": True, "delta": False}], indirect=True)
async def test_wait_for_raises_when_the_client_closes(client: XdsClient) -> None:
    waiting = asyncio.create_task(client.wait_for(CLUSTER, "never", timeout=5))
    await asyncio.sleep(0)
    await client.close()
    with pytest.raises(ClientClosedError, match="closed while waiting"):
        await waiting
