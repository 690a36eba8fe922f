"""A stream the server ends just as the client writes its ACK reports the server's status, not
gRPC's own INTERNAL for the failed write."""

from __future__ import annotations

import logging

import grpc
import pytest

from tests.client.conftest import FAST_BACKOFF
from tests.conformance.servers import grpc_server
from tests.helpers import eventually
from tests.load.servers import Ending
from xdsclient import ClientOptions, XdsClient
from xdsclient.resources import LISTENER


async def test_a_stream_ended_as_the_ack_goes_out_reports_the_servers_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server that answers, then ends each stream UNAVAILABLE while the ACK is written: every
    stream failure the client logs is the server's UNAVAILABLE with its details."""
    caplog.set_level(logging.DEBUG, logger="xdsclient")
    server = Ending(grpc.StatusCode.UNAVAILABLE, answer=True, limit=8)
    async with grpc_server(*server.handlers()) as address:
        options = ClientOptions(backoff=FAST_BACKOFF)
        async with (
            XdsClient(address, node_id="n", options=options) as client,
            client.watch(LISTENER, "l"),
        ):
            await eventually(lambda: server.streams >= 8, timeout=20)
    logged = [r.getMessage() for r in caplog.records if r.name == "xdsclient.transport"]
    failures = [m for m in logged if "stream to" in m]
    assert len(failures) >= 5, logged
    assert not [m for m in failures if "INTERNAL" in m], failures
    assert all("UNAVAILABLE: this server ends every stream" in m for m in failures), failures
