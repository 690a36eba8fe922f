"""Protocol observers against the real control plane, over every variant: what they hear
matches what the server logged, request for request."""

from __future__ import annotations

from tests.builders import endpoints, invalid_endpoints
from tests.helpers import eventually
from xdsclient import ProtocolEvent, RequestSent, ResourceUpdate, ResponseReceived, XdsClient
from xdsclient.resources import ENDPOINT
from xdsclient.testing import ControlPlane


async def test_observed_requests_and_nacks_match_the_servers_log(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    told: list[ProtocolEvent] = []
    client.add_observer(told.append)
    control_plane.set(endpoints("a"))
    control_plane.set(invalid_endpoints("b"))
    async with client.watch(ENDPOINT, "a"), client.watch(ENDPOINT, "b"):
        await eventually(lambda: len(control_plane.nacks(ENDPOINT.type_url)) >= 1)
        await eventually(lambda: sum(isinstance(e, RequestSent) and e.is_nack for e in told) >= 1)
    sent = [e for e in told if isinstance(e, RequestSent)]
    logged = [r for r in control_plane.requests if r.type_url == ENDPOINT.type_url]
    assert [e.nonce for e in sent][: len(logged)] == [r.message.response_nonce for r in logged]
    nack = next(e for e in sent if e.is_nack)
    assert (
        nack.error_detail == control_plane.nacks(ENDPOINT.type_url)[0].message.error_detail.message
    )
    assert "socket_address.address" in (nack.error_detail or "")
    received = [e for e in told if isinstance(e, ResponseReceived)]
    assert received
    assert all(e.server == control_plane.address for e in received)
    verdicts = {(e.name, e.valid) for e in told if isinstance(e, ResourceUpdate)}
    assert ("a", True) in verdicts
    assert ("b", False) in verdicts
