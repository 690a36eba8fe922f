"""The test HTTP backends (`xdsclient.testing.http_backends`): real hypercorn servers on
127.0.0.1 that count, echo and follow a script per path, spoken to with plain httpx."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import sys
from pathlib import Path

import httpx
import pytest

from xdsclient import MissingExtraError
from xdsclient.testing import Behaviour, HttpBackend, http_backends

from .tls_certs import authority, dns, ip

pytestmark = pytest.mark.timeout(20)


async def test_each_backend_answers_with_its_name_and_counts_what_it_received() -> None:
    """Two backends on their own free ports each answer with their name (header and JSON
    echo of the request) and count requests per path, the query apart."""
    async with http_backends(2) as (a, b), httpx.AsyncClient() as http:
        assert a.port != b.port
        response = await http.get(f"http://127.0.0.1:{a.port}/x?y=1", headers={"x-u": "7"})
        await http.post(f"http://127.0.0.1:{b.port}/x", content=b"body")
        await http.get(f"http://127.0.0.1:{b.port}/x")
    assert response.headers["x-backend"] == "b0"
    assert response.json() == {
        "backend": "b0",
        "method": "GET",
        "path": "/x?y=1",
        "http_version": "1.1",
        "host": f"127.0.0.1:{a.port}",
    }
    assert a.requests[0].header("X-U") == "7"
    assert (a.counts, b.counts) == ({"/x": 1}, {"/x": 2})
    assert b.requests[0].body == b"body"
    assert b.total == 2


async def test_a_script_answers_each_request_in_turn_then_its_default() -> None:
    """Scripted statuses, headers and bodies answer a path's requests one each, then the
    default (``then``, else the echo); "*" scripts every other path."""
    async with http_backends(1, names=["s"]) as (backend,), httpx.AsyncClient() as http:
        base = f"http://127.0.0.1:{backend.port}"
        backend.script(
            "/a",
            Behaviour(status=503),
            Behaviour(status=429, headers=(("Retry-After", "1"),)),
            then=Behaviour(status=201, body=b"done"),
        )
        backend.script("*", Behaviour(status=404))
        got = [await http.get(f"{base}/a") for _ in range(4)]
        other = [await http.get(f"{base}/b") for _ in range(2)]
    assert [r.status_code for r in got] == [503, 429, 201, 201]
    assert got[1].headers["retry-after"] == "1"
    assert got[3].text == "done"
    assert [r.status_code for r in other] == [404, 200]
    assert backend.counts == {"/a": 4, "/b": 2}


async def test_a_delay_holds_the_answer() -> None:
    """A scripted delay makes the client wait at least that long (its read timeout fires
    when shorter)."""
    async with http_backends(1) as (backend,), httpx.AsyncClient() as http:
        backend.script("/slow", Behaviour(delay=0.3), Behaviour(delay=3))
        response = await http.get(f"http://127.0.0.1:{backend.port}/slow")
        assert response.status_code == 200
        assert response.elapsed.total_seconds() >= 0.3
        with pytest.raises(httpx.ReadTimeout):
            await http.get(f"http://127.0.0.1:{backend.port}/slow", timeout=0.2)


@pytest.mark.parametrize("http2", [False, True], ids=["HTTP/1.1", "HTTP/2"])
async def test_a_reset_closes_the_connection_before_any_response(http2: bool) -> None:
    """A scripted reset ends the connection without an answer, in HTTP/1.1 and in HTTP/2
    (prior knowledge); the request is counted and the next one is answered."""
    async with (
        http_backends(1) as (backend,),
        httpx.AsyncClient(http1=not http2, http2=http2) as http,
    ):
        backend.script("/r", Behaviour(reset=True))
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(f"http://127.0.0.1:{backend.port}/r")
        again = await http.get(f"http://127.0.0.1:{backend.port}/r")
    assert again.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    assert backend.counts["/r"] == 2


async def test_tls_backends_record_sni_speak_http2_and_can_require_client_certificates(
    tmp_path: Path,
) -> None:
    """With a certificate, a backend speaks TLS (HTTP/2 by ALPN), records the SNI of each
    handshake, and with a client CA refuses a client without a certificate."""
    ca = authority(tmp_path)
    server = ca.issue(tmp_path, "server", [dns("localhost"), ip("127.0.0.1")])
    client = ca.issue(tmp_path, "client", [dns("client.test")])
    trust = ssl.create_default_context(cafile=str(ca.cert))
    async with http_backends(1, certfile=server.cert, keyfile=server.key) as (backend,):
        async with httpx.AsyncClient(verify=trust, http2=True) as http:
            response = await http.get(f"https://localhost:{backend.port}/")
        assert response.http_version == "HTTP/2"
        assert backend.server_names == ["localhost"]
    async with http_backends(1, certfile=server.cert, keyfile=server.key, client_ca=ca.cert) as (
        strict,
    ):
        async with httpx.AsyncClient(verify=trust) as http:
            with pytest.raises(httpx.TransportError):
                await http.get(f"https://localhost:{strict.port}/")
        mtls = ssl.create_default_context(cafile=str(ca.cert))
        mtls.load_cert_chain(client.cert, client.key)
        async with httpx.AsyncClient(verify=mtls) as http:
            assert (await http.get(f"https://localhost:{strict.port}/")).status_code == 200
    assert strict.total == 1


async def test_a_tls_backend_stops_at_once_though_a_client_keeps_an_idle_connection(
    tmp_path: Path,
) -> None:
    """A client pool keeping an idle TLS connection (it never reads it) does not hold the
    backend's stop for asyncio's TLS shutdown timeout: the server does not wait for the
    client's close_notify."""
    ca = authority(tmp_path)
    server = ca.issue(tmp_path, "server", [dns("localhost")])
    trust = ssl.create_default_context(cafile=str(ca.cert))
    async with httpx.AsyncClient(verify=trust) as http:
        backend = HttpBackend("idle", certfile=server.cert, keyfile=server.key)
        await backend.start()
        await http.get(f"https://localhost:{backend.port}/")
        loop = asyncio.get_running_loop()
        started = loop.time()
        await backend.stop()
        assert loop.time() - started < 5


async def test_a_stopped_backend_starts_again_on_its_port() -> None:
    """`stop` then `start` serves again on the same port, keeping the counts."""
    backend = HttpBackend("again")
    await backend.start()
    try:
        port = backend.port
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/")
        await backend.stop(keep_port=True)
        await backend.start()
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/")
    finally:
        await backend.stop()
    assert backend.port == port
    assert backend.total == 2


def _binds(port: int) -> bool:
    """Whether another server could take ``port`` now (a plain socket binds to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        try:
            other.bind(("127.0.0.1", port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            return False
    return True


async def test_a_backend_stopped_keeping_its_port_lets_no_other_socket_take_it() -> None:
    """Stopped with ``keep_port``, a backend's port refuses connections and no other socket
    can bind it until the backend serves there again; stopped without, the port is free."""
    backend = HttpBackend("kept")
    await backend.start()
    try:
        port = backend.port
        await backend.stop(keep_port=True)
        assert not _binds(port)
        async with httpx.AsyncClient() as http:
            with pytest.raises(httpx.ConnectError):
                await http.get(f"http://127.0.0.1:{port}/")
            await backend.start()
            assert (await http.get(f"http://127.0.0.1:{port}/")).status_code == 200
    finally:
        await backend.stop()
    assert (backend.port, backend.total) == (port, 1)
    assert _binds(port)


async def test_without_hypercorn_a_backend_says_which_extra_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Starting a backend without hypercorn raises MissingExtraError naming the extra."""
    monkeypatch.setitem(sys.modules, "hypercorn.asyncio", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'xdsclient\[dev\]'"):
        await HttpBackend("x").start()
