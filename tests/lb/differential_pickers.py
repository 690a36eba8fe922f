"""grpcio's C-core xDS client against our pickers: same control plane, same resources, real
backends that say who they are.

Why a subprocess: C-core reads its bootstrap from the environment once per process. The child
opens ``xds:///<listener>``, makes one wait-for-ready RPC per line of headers it is given, and
prints the port of the backend that answered each. Our side decodes the very messages the
control plane serves with our views and picks with our blocks; a test compares the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import grpc

from tests.children import stop_child
from xdsclient.testing import ControlPlane, bootstrap
from xdsclient.testing._ports import KeptPort

METHOD = "/lbtest.Who/Am"

_CHILD = r"""
import json, sys, grpc
channel = grpc.insecure_channel("xds:///" + sys.argv[1])
call = channel.unary_unary(sys.argv[2])
out = []
for headers in json.loads(sys.stdin.read()):
    reply = call(b"", metadata=list(headers.items()), wait_for_ready=True, timeout=20)
    out.append(int(reply))
print(json.dumps(out), flush=True)
"""


class _Who(grpc.GenericRpcHandler):
    """Answers every RPC of `METHOD` with its own port (telling ``answered``, if given)."""

    def __init__(self, answered: Callable[[], Awaitable[None]] | None = None) -> None:
        self.port = 0
        self._answered = answered

    def service(self, handler_call_details: Any) -> Any:
        if handler_call_details.method != METHOD:
            return None

        async def answer(request: bytes, context: Any) -> bytes:
            if self._answered is not None:
                await self._answered()
            return str(self.port).encode()

        return grpc.unary_unary_rpc_method_handler(answer)


@contextlib.contextmanager
def _bootstrap_file(plane: ControlPlane, node_id: str) -> Iterator[str]:
    """The path of a bootstrap file for grpcio's xDS client of ``plane``, until the context
    ends."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bootstrap.json")
        with open(path, "w") as file:
            json.dump(bootstrap([plane], node_id=node_id, server_features=["xds_v3"]), file)
        yield path


async def run_grpcio(
    plane: ControlPlane,
    node_id: str,
    child: str,
    args: Sequence[str],
    payload: Any,
    *,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
) -> Any:
    """Run ``child`` (a Python program using grpcio's xDS client) bootstrapped to ``plane`` as
    node ``node_id``, with ``args``; give it ``payload`` as JSON on stdin and return the JSON
    it prints. Killed after ``timeout`` seconds."""
    with _bootstrap_file(plane, node_id) as path:
        child_env = {
            **os.environ,
            "GRPC_VERBOSITY": "NONE",
            "GRPC_XDS_BOOTSTRAP": path,
            **(env or {}),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", child, *args,
            env=child_env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(
                process.communicate(json.dumps(payload).encode()), timeout
            )
        finally:
            await stop_child(process, grace=0)
    return json.loads(out)


@contextlib.asynccontextmanager
async def backends(count: int) -> AsyncIterator[list[int]]:
    """``count`` grpc.aio servers on 127.0.0.1 answering with their port; yields the ports."""
    servers = []
    ports = []
    try:
        for _ in range(count):
            handler = _Who()
            server = grpc.aio.server()
            server.add_generic_rpc_handlers([handler])
            handler.port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            servers.append(server)
            ports.append(handler.port)
        yield ports
    finally:
        for server in servers:
            await server.stop(None)


async def grpc_picks(
    resources: Sequence[Any],
    listener: str,
    calls: Sequence[Mapping[str, str]],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> list[int]:
    """The backend port C-core sends each call to (``calls``: each call's headers), with
    ``resources`` served by a fresh control plane."""
    async with ControlPlane() as plane:
        plane.set_all(resources)
        picks: list[int] = await run_grpcio(
            plane, "lb-pickers", _CHILD, (listener, METHOD), list(map(dict, calls)),
            timeout=timeout, env=env,
        )  # fmt: skip
    return picks


# -- an interactive grpcio client, for tests whose backends change between phases ----------------


def settled(recent: Sequence[int], until: Sequence[int], streak: int) -> bool:
    """Whether a phase has settled, by the ports its last calls went to (``recent``, at most
    ``streak``): the last ``streak`` calls all went to ``until``, and to each of them when the
    streak is long enough to show it (round robin over every expected backend: all of them
    READY, not the first of them only). grpcio's session child runs this very function."""
    if len(recent) < streak or any(port not in until for port in recent):
        return False
    return streak < len(until) or set(until) <= set(recent)


# the child settles by `settled` itself (its source, sent along), so both sides settle alike
_SESSION_CHILD = (
    r"""
from __future__ import annotations
import collections, json, sys, time, grpc
from collections.abc import Sequence
options = [(name, value) for name, value in json.loads(sys.argv[3])]
channel = grpc.insecure_channel("xds:///" + sys.argv[1], options=options)
call = channel.unary_unary(sys.argv[2])

def one():
    try:
        return int(call(b"", wait_for_ready=True, timeout=5))
    except grpc.RpcError:
        return 0
"""
    + inspect.getsource(settled)
    + r"""
for line in sys.stdin:
    command = json.loads(line)
    until, streak = command["until"], command["streak"]
    deadline, settle = time.monotonic() + command["limit"], 0
    recent = collections.deque(maxlen=streak)
    while until and not settled(recent, until, streak):
        if time.monotonic() > deadline:
            settle = -1
            break
        settle += 1
        recent.append(one())
    print(json.dumps({"settle": settle, "picks": [one() for _ in range(command["calls"])]}),
          flush=True)
"""
)


class Backend:
    """One grpc.aio server on 127.0.0.1 answering `METHOD` with its port; it can be stopped and
    started again on the same port; it counts the calls it answers.

    While stopped it keeps its port (`xdsclient.testing._ports.KeptPort`, bound before the server
    stops), so no other socket on the machine (another test's server or connection) takes the
    port in between and answers or blocks the restart."""

    def __init__(self) -> None:
        self.port = 0
        self.answers = 0
        self._counted = asyncio.Condition()
        self._server: grpc.aio.Server | None = None
        self._kept = KeptPort()

    async def answered(self, count: int) -> None:
        """Return once ``count`` calls in all have been answered."""
        async with self._counted:
            await self._counted.wait_for(lambda: self.answers >= count)

    async def _answer(self) -> None:
        async with self._counted:
            self.answers += 1
            self._counted.notify_all()

    async def start(self) -> None:
        """Listen (on the same port as before after a `stop`)."""
        handler = _Who(self._answer)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([handler])
        self.port = handler.port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        await server.start()
        self._server = server
        self._kept.release()

    async def stop(self) -> None:
        """Stop at once, closing every connection; the port stays this backend's until
        `close`."""
        if self._server is not None:
            self._kept.keep(self.port)
            await self._server.stop(None)
            self._server = None

    async def close(self) -> None:
        """Stop, and give the port back."""
        await self.stop()
        self._kept.release()


class GrpcSession:
    """grpcio's C-core xDS client in a child process, driven one phase at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    async def calls(
        self, calls: int, *, until: Sequence[int] = (), streak: int = 1, limit: float = 10.0
    ) -> tuple[int, list[int]]:
        """Send calls until they have `settled` on ``until`` (``streak`` in a row there, on
        each of them when ``streak`` can show it; at most ``limit`` seconds, the count is -1
        if they did not), then ``calls`` more; returns the count of settling calls and the
        ports of the ``calls`` (0 for a failed call)."""
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        command = {"calls": calls, "until": list(until), "streak": streak, "limit": limit}
        self._process.stdin.write(json.dumps(command).encode() + b"\n")
        await self._process.stdin.drain()
        line = await asyncio.wait_for(self._process.stdout.readline(), limit + 5 * calls + 5)
        answer = json.loads(line)
        return answer["settle"], answer["picks"]


@contextlib.asynccontextmanager
async def grpc_session(
    plane: ControlPlane, listener: str, *, options: Sequence[tuple[str, int]] = ()
) -> AsyncIterator[GrpcSession]:
    """grpcio's xDS client for ``listener``, bootstrapped to ``plane``, with channel
    ``options``, until the context ends."""
    with _bootstrap_file(plane, "lb-tree") as path:
        env = {**os.environ, "GRPC_VERBOSITY": "NONE", "GRPC_XDS_BOOTSTRAP": path}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _SESSION_CHILD, listener, METHOD, json.dumps(list(options)),
            env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            yield GrpcSession(process)
        finally:
            await stop_child(process, grace=0)


# -- grpcio's client reporting load (LRS), for tests/lrs/test_grpc_differential.py ----------------

_LOAD_CHILD = r"""
import json, sys, grpc
channel = grpc.insecure_channel("xds:///" + sys.argv[1])
for line in sys.stdin:
    codes = []
    for method, count in json.loads(line):
        call = channel.unary_unary(method)
        for _ in range(count):
            try:
                call(b"", wait_for_ready=True, timeout=10)
                codes.append("OK")
            except grpc.RpcError as error:
                codes.append(error.code().name)
    print(json.dumps(codes), flush=True)
channel.close()
"""


class GrpcLoadSession:
    """grpcio's C-core xDS client in a child process, making calls when told."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    async def calls(self, plan: Sequence[tuple[str, int]], *, limit: float = 20.0) -> list[str]:
        """Make, in order, ``count`` calls of each ``(method, count)`` of ``plan``; returns each
        call's status code name (``OK``, ``UNIMPLEMENTED``...)."""
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(json.dumps(list(plan)).encode() + b"\n")
        await self._process.stdin.drain()
        codes: list[str] = json.loads(
            await asyncio.wait_for(self._process.stdout.readline(), limit)
        )
        return codes


@contextlib.asynccontextmanager
async def grpc_load_session(
    plane: ControlPlane, listener: str, node_id: str
) -> AsyncIterator[GrpcLoadSession]:
    """grpcio's xDS client for ``listener``, bootstrapped to ``plane`` as node ``node_id``,
    until the context ends (its channel is closed then, before the process ends)."""
    with _bootstrap_file(plane, node_id) as path:
        env = {**os.environ, "GRPC_VERBOSITY": "NONE", "GRPC_XDS_BOOTSTRAP": path}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _LOAD_CHILD, listener,
            env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            yield GrpcLoadSession(process)
        finally:
            await stop_child(process)
