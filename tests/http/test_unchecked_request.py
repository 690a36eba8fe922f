"""`unchecked_request`: the httpcore request the transport builds from a valid httpx request
without httpcore's checks is the one httpcore's own constructor builds (httpx's transport's)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpcore
import httpx

from xdsclient.httpx._connections import unchecked_request


async def _chunks() -> AsyncIterator[bytes]:
    yield b"a"


def _fields(request: httpcore.Request) -> tuple[object, ...]:
    url = request.url
    return (
        request.method,
        (url.scheme, url.host, url.port, url.target),
        request.headers,
        request.stream,
        request.extensions,
    )


def test_an_unchecked_request_equals_httpcores_checked_one() -> None:
    """For requests with a byte body, a streamed body, repeated headers and a query, every
    field (method, URL parts, headers, stream, extensions) is what ``httpcore.Request`` makes,
    of the same types."""
    requests = [
        httpx.Request("GET", "http://svc.test/a/b?x=1&y=%20", headers=[("x-a", "1"), ("x-a", "2")]),
        httpx.Request("POST", "http://svc.test/", content=b"body"),
        httpx.Request("PUT", "http://svc.test/up", content=_chunks()),
        httpx.Request("GET", "http://svc.test/", headers={"host": "other.svc"}),
    ]
    for request in requests:
        extensions = {"timeout": {"connect": 1.0, "read": 1.0, "write": 1.0, "pool": 1.0}}
        checked = httpcore.Request(
            request.method,
            httpcore.URL(scheme=b"http", host=b"127.0.0.1", port=8080, target=request.url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=extensions,
        )
        unchecked = unchecked_request(
            request.method.encode("ascii"),
            b"http",
            b"127.0.0.1",
            8080,
            request.url.raw_path,
            request,
            extensions,
        )
        assert _fields(unchecked) == _fields(checked)
        assert [type(f) for f in _fields(unchecked)] == [type(f) for f in _fields(checked)]
