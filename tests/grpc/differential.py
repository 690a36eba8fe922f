"""The same calls on grpcio's own ``xds:///`` channel and on `XdsChannel`: what the differential
tests of tests/grpc share.

Why a child process for grpcio: C-core reads its bootstrap once per process. The child opens
``xds:///<listener>`` for each listener named, makes the calls it is given in order (the echo
service's ``Say``, with metadata, a timeout and ``wait_for_ready``; a run of calls marked
``together`` all at once, on threads), and prints, per call, the
status code, details, the reply and the seconds it took. `ours` makes the same calls in the same
order on one `XdsChannel` per listener over an `XdsClient` of the same control plane. Both read
complete resources (nothing missing), so neither waits for a does-not-exist timer.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence

import attrs
import grpc

from tests.lb.differential_pickers import run_grpcio
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane

from .echo import SAY, Text

_CHILD = r"""
import json, sys, time, grpc
from concurrent.futures import ThreadPoolExecutor
from google.protobuf import wrappers_pb2
Text = wrappers_pb2.StringValue
channels = {}
def call(row):
    listener, value, metadata, timeout, ready, _ = row
    start = time.monotonic()
    try:
        reply = channels[listener](
            Text(value=value), timeout=timeout,
            metadata=[(k, v.encode() if k.endswith("-bin") else v) for k, v in metadata],
            wait_for_ready=ready)
        return ["OK", "", reply.value, time.monotonic() - start]
    except grpc.RpcError as error:
        return [error.code().name, error.details(), "", time.monotonic() - start]
rows = json.loads(sys.stdin.read())
out = []
while len(out) < len(rows):
    group = [rows[len(out)]]
    while group[0][5] and len(out) + len(group) < len(rows) and rows[len(out) + len(group)][5]:
        group.append(rows[len(out) + len(group)])
    for listener in {row[0] for row in group} - set(channels):
        channels[listener] = grpc.insecure_channel("xds:///" + listener).unary_unary(
            sys.argv[1], request_serializer=Text.SerializeToString,
            response_deserializer=Text.FromString)
    with ThreadPoolExecutor(len(group)) as pool:
        out.extend(pool.map(call, group))
print(json.dumps(out), flush=True)
"""


@attrs.frozen(kw_only=True)
class Call:
    """One ``Say`` call: on which listener, its request value, metadata (a ``-bin`` key's value
    sent as its UTF-8 bytes), timeout, whether it waits for ready, and whether it is made
    ``together`` with its neighbours that also are (all started at once, each timed alone)."""

    listener: str
    value: str = "hi"
    metadata: tuple[tuple[str, str], ...] = ()
    timeout: float = 5.0
    wait_for_ready: bool = False
    together: bool = False


@attrs.frozen
class Result:
    """How one call ended: the status code's name, details, the reply (`EchoBackend` answers
    ``<backend>:<request>``), and the seconds it took."""

    code: str
    details: str
    reply: str
    seconds: float = attrs.field(eq=False)

    @property
    def backend(self) -> str:
        """The backend that answered ('' for a failed call)."""
        return self.reply.partition(":")[0]


async def theirs(plane: ControlPlane, calls: Sequence[Call], *, node_id: str) -> list[Result]:
    """``calls`` made in order on grpcio's ``xds:///`` channel (node ``node_id``)."""
    payload = [
        [
            c.listener,
            c.value,
            [list(m) for m in c.metadata],
            c.timeout,
            c.wait_for_ready,
            c.together,
        ]
        for c in calls
    ]
    rows = await run_grpcio(plane, node_id, _CHILD, (SAY,), payload, timeout=40)
    return [Result(*row) for row in rows]


async def ours(
    plane: ControlPlane, calls: Sequence[Call], *, node_id: str, seed: int = 32
) -> list[Result]:
    """``calls`` made in order on an `XdsChannel` per listener (node ``node_id``)."""
    results = []
    async with XdsClient(plane.address, node_id=node_id) as client:
        channels: dict[str, XdsChannel] = {}
        try:
            for group in _groups(calls):
                for call in group:
                    if call.listener not in channels:
                        channels[call.listener] = XdsChannel(
                            f"xds:///{call.listener}", client=client, rng=random.Random(seed)
                        )
                results += await asyncio.gather(*(_one(channels[c.listener], c) for c in group))
        finally:
            for channel in channels.values():
                await channel.close()
    return results


def _groups(calls: Sequence[Call]) -> list[list[Call]]:
    """``calls`` in the order they are made: each alone, but a run of ``together`` ones as one
    group."""
    groups: list[list[Call]] = []
    for call in calls:
        if call.together and groups and groups[-1][-1].together:
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


async def _one(channel: XdsChannel, call: Call) -> Result:
    say = channel.unary_unary(
        SAY, request_serializer=Text.SerializeToString, response_deserializer=Text.FromString
    )
    start = time.monotonic()
    try:
        reply = await say(
            Text(value=call.value),
            metadata=[(k, v.encode() if k.endswith("-bin") else v) for k, v in call.metadata],
            timeout=call.timeout,
            wait_for_ready=call.wait_for_ready,
        )
    except grpc.aio.AioRpcError as error:
        return Result(error.code().name, error.details() or "", "", time.monotonic() - start)
    return Result("OK", "", reply.value, time.monotonic() - start)


async def both(
    plane: ControlPlane, calls: Sequence[Call], *, node: str = "diff"
) -> tuple[list[Result], list[Result]]:
    """(grpcio's results, ours) of the same ``calls``, grpcio's first (nodes ``<node>-grpc``
    and ``<node>-ours``)."""
    grpc_results = await theirs(plane, calls, node_id=f"{node}-grpc")
    our_results = await ours(plane, calls, node_id=f"{node}-ours")
    return grpc_results, our_results
