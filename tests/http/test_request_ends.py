"""Every request an `XdsTransport` starts on a connection ends there exactly once, whatever path
it takes out: here the rare ones, a raise while the request is being handed to the connection's
pool and a raise while its response is wrapped. Each leaves the connection with no request
running (so it closes once unheld), its pool free, and the backend not blamed: cluster ``c``
ejects an endpoint at its first failure, yet the next request is answered."""

from __future__ import annotations

import types
from typing import Any

import httpx
import pytest

from tests.helpers import eventually
from xdsclient import XdsClient
from xdsclient.httpx import XdsTransport, _connections
from xdsclient.testing import ControlPlane, HttpBackend, http_backends

from .resources import LISTENER, ejecting

pytestmark = pytest.mark.timeout(30)


def connection_of(transport: XdsTransport, backend: HttpBackend) -> _connections.HttpConnection:
    """The transport's connection to ``backend``."""
    return transport._core.connections.connect(("127.0.0.1", backend.port))


async def test_a_request_refused_as_it_is_handed_to_the_pool_leaves_no_request_running(
    cp: ControlPlane, client: XdsClient
) -> None:
    """A request whose ``timeout`` extension is not httpx's mapping raises while it is made
    into the pool's request: the caller gets the error, the connection counts no request
    running, and the backend, not at fault, still answers the next request."""
    async with http_backends(names=("a",)) as (a,):
        cp.set_all(ejecting([a]))
        async with (
            XdsTransport(LISTENER, client=client) as transport,
            httpx.AsyncClient(transport=transport, timeout=10) as http,
        ):
            with pytest.raises(AttributeError):
                await http.get("http://svc/", extensions={"timeout": 5})
            assert connection_of(transport, a).requests == 0
            assert a.total == 0
            assert (await http.get("http://svc/after")).status_code == 200


class _Unwrappable(httpx.Response):
    """A response that cannot be made: raises as it is built around a connection's body."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("stream"), _connections.ResponseBody):
            raise MemoryError("no room for the response")
        super().__init__(*args, **kwargs)


@pytest.mark.parametrize("http2", [False, True], ids=["HTTP/1.1", "HTTP/2"])
async def test_a_response_that_cannot_be_wrapped_ends_its_request_and_frees_the_pool(
    cp: ControlPlane, client: XdsClient, monkeypatch: pytest.MonkeyPatch, http2: bool
) -> None:
    """Wrapping the pool's response raises (a fault injected: no upstream can make it): the
    caller gets the error, the response is closed (the pool has no request left), the
    connection counts no request running, and the backend still answers the next request."""
    async with http_backends(names=("a",)) as (a,):
        cp.set_all(ejecting([a]))
        async with (
            XdsTransport(LISTENER, client=client, http1=not http2, http2=http2) as transport,
            httpx.AsyncClient(transport=transport, timeout=10) as http,
        ):
            failing = types.SimpleNamespace(**{**vars(httpx), "Response": _Unwrappable})
            monkeypatch.setattr(_connections, "httpx", failing)
            with pytest.raises(MemoryError):
                await http.get("http://svc/")
            monkeypatch.undo()
            assert a.total == 1
            connection = connection_of(transport, a)
            await eventually(lambda: connection.requests == 0, what="the request ended")
            await eventually(
                lambda: not connection.pool._requests, what="the pool's request closed"
            )
            after = await http.get("http://svc/after")
            assert (after.status_code, a.total) == (200, 2)
