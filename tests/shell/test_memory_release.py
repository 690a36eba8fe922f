"""glibc's freed memory is handed back around a large response: before it is decoded and once
more before the next read, over real gRPC; never for small ones, and never off glibc."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

import pytest

from tests.builders import cluster, endpoints
from xdsclient import ClientOptions, ResourceChanged, XdsClient
from xdsclient._runtime._malloc import MemoryRelease, glibc_trim, is_glibc
from xdsclient._transports._grpc import GrpcTransport
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane

#: A message of this many bytes is large in these tests: the CDS response of `_big_cluster` is,
#: one of a small assignment is not.
LARGE = 1_000


def _big_cluster() -> Any:
    message = cluster("big")
    message.metadata.filter_metadata["pad"].fields["text"].string_value = "x" * (2 * LARGE)
    return message


class _Recording(MemoryRelease):
    """A release that notes, for each message it is told of, its size and the trims so far."""

    def __init__(self) -> None:
        super().__init__(self._count, large=LARGE)
        self.seen: list[tuple[int, int]] = []
        self.called = 0

    def _count(self) -> None:
        self.called += 1

    def received(self, size: int) -> None:
        self.seen.append((size, self.trims))
        super().received(size)


async def _next_change(updates: Any) -> ResourceChanged:
    event = await asyncio.wait_for(anext(updates), 10)
    assert isinstance(event, ResourceChanged)
    return event


async def test_a_large_response_trims_once_before_the_next_read_and_small_ones_never(
    control_plane: ControlPlane,
) -> None:
    """The large CDS response trims before its decode and once more before the next read; the
    three small EDS responses after it trim nothing."""
    release = _Recording()

    def transport(server: Any, options: ClientOptions) -> GrpcTransport:
        return GrpcTransport(server, options, memory=release)

    control_plane.set(_big_cluster())
    control_plane.set(endpoints("x", port=1))
    async with (
        XdsClient(control_plane.address, node_id="n", transport=transport) as client,
        AsyncExitStack() as stack,
    ):
        await _next_change(await stack.enter_async_context(client.watch(CLUSTER, "big")))
        assignment = await stack.enter_async_context(client.watch(ENDPOINT, "x"))
        await _next_change(assignment)
        for port in (2, 3):
            control_plane.set(endpoints("x", port=port))
            await _next_change(assignment)
    sizes = [size for size, _ in release.seen]
    assert sizes[0] >= LARGE
    assert all(size < LARGE for size in sizes[1:]), sizes
    assert [trims for _, trims in release.seen] == [0, 2, 2, 2]
    assert release.called == release.trims == 2


def test_small_messages_never_trim_and_a_large_one_trims_before_and_after() -> None:
    """A message of ``large`` bytes or more trims as it is received and at the next `settle`,
    once; a smaller one never."""
    calls: list[None] = []
    release = MemoryRelease(lambda: calls.append(None), large=100)
    release.received(99)
    release.settle()
    assert calls == []
    release.received(100)
    assert len(calls) == 1
    release.received(5)
    release.settle()
    release.settle()
    assert len(calls) == release.trims == 2


def test_off_glibc_nothing_trims() -> None:
    """Without glibc the release has nothing to call, and a large message changes nothing."""
    release = MemoryRelease(None, large=1)
    release.received(10**9)
    release.settle()
    assert release.trims == 0


def _unknown_name(name: str) -> str:
    raise ValueError("unrecognized configuration name")


@pytest.mark.parametrize(
    ("confstr", "expected"),
    [
        (lambda name: "glibc 2.36", True),
        (lambda name: None, False),  # a libc that names no version (musl)
        (_unknown_name, False),  # macOS: no such name
        (lambda name: "uClibc 1.0", False),
    ],
)
def test_glibc_is_told_apart_by_its_version_string(confstr: Any, expected: bool) -> None:
    """Only a C library that calls itself glibc is trimmed."""
    assert is_glibc(confstr) is expected


def test_a_platform_without_confstr_is_not_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has no ``os.confstr``: the transport still imports and never trims."""
    monkeypatch.delattr("os.confstr", raising=False)
    assert is_glibc() is False
    assert MemoryRelease.for_platform()._trim is None


@pytest.mark.skipif(not is_glibc(), reason="glibc only")
def test_the_glibc_trim_calls_malloc_trim() -> None:
    """On glibc the platform's release trims with ``malloc_trim(0)`` (a smoke test: it answers
    0 or 1 whatever it released)."""
    assert glibc_trim() in (0, 1)
    assert MemoryRelease.for_platform()._trim is glibc_trim
