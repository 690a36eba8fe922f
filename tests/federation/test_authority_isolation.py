"""Resources of one authority satisfy only watches of that authority, served by its own servers
(gRFC A47), whatever stream they arrive on: in-memory transport, fake clock."""

from __future__ import annotations

from typing import Any

from tests.builders import endpoints
from tests.client.conftest import Variant
from tests.helpers import idle
from tests.shell.conftest import OPTIONS
from xdsclient import CallbackWatcher, Event, ResourceChanged, XdsClient, load_bootstrap
from xdsclient.resources import ENDPOINT
from xdsclient.testing import FakeClock, FakeTransport, bootstrap

TOP, B_SERVER = "top:1", "b-server:1"
B_NAME = "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/y"


def _ports(seen: list[Event]) -> list[Any]:
    return [
        e.value.localities[0].endpoints[0].port if isinstance(e, ResourceChanged) else e
        for e in seen
    ]


async def test_a_resource_of_another_authority_sent_through_the_wildcard_is_not_delivered(
    fake: FakeTransport, clock: FakeClock, variant: Variant
) -> None:
    """An xdstp://b.example resource that the top-level server sends to a wildcard watch
    reaches neither b.example's watcher of that name nor the cache entry b.example reads."""
    config = load_bootstrap(bootstrap([TOP], authorities={"b.example": [B_SERVER]}))
    async with XdsClient(
        bootstrap=config, transport=fake, clock=clock, options=OPTIONS, **variant
    ) as client:
        everything: list[Event] = []
        of_b: list[Event] = []
        client.add_watcher(ENDPOINT, "*", CallbackWatcher(everything.append))
        client.add_watcher(ENDPOINT, B_NAME, CallbackWatcher(of_b.append))
        top, b_stream = await fake.stream(TOP), await fake.stream(B_SERVER)
        await top.request()
        await b_stream.request()
        top.send([endpoints("old", port=1), endpoints(B_NAME, port=9)], version="1")
        await idle()
        assert _ports(of_b) == []
        assert _ports(everything) == [1]
        assert client.resource_state(ENDPOINT, B_NAME).value is None  # type: ignore[union-attr]
        b_stream.send([endpoints(B_NAME, port=3)], version="1")
        await idle()
        assert _ports(of_b) == [3]
        state = client.resource_state(ENDPOINT, B_NAME)
        assert state is not None
        assert state.value.localities[0].endpoints[0].port == 3
