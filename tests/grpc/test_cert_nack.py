"""A cluster naming a certificate provider instance the bootstrap lacks is NACKed at decode, as
gRPC does (gRFC A29, C-core's decode context): the other resources of the response are applied,
the last good version of the cluster keeps carrying calls, and a later good version is ACKed.
Compared with grpcio's own xDS client on the same control plane."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from tests.call.builders import add_route, listener, route_config
from tests.certs import make_pki
from tests.client.conftest import next_event
from tests.helpers import eventually
from tests.lb.differential_pickers import METHOD, backends, run_grpcio
from xdsclient import ResourceChanged, ResourceStatus, XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane, bootstrap, builders

from .echo import SAY, EchoBackend, EchoStub, Text, simple

NODE = "cert-nack"
_FIELD = (
    "transport_socket.typed_config.common_tls_context.validation_context."
    "ca_certificate_provider_instance.instance_name"
)
_UNKNOWN = "unrecognized certificate provider instance name: nope"
_TLS = "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"


def _naming(cluster: Any, instance: str) -> Any:
    """``cluster`` with a TLS context whose CA comes from provider ``instance``."""
    context = tls_pb2.UpstreamTlsContext()
    context.common_tls_context.validation_context.ca_certificate_provider_instance.instance_name = (
        instance
    )
    cluster.transport_socket.name = "envoy.transport_sockets.tls"
    cluster.transport_socket.typed_config.Pack(context)
    return cluster


@contextlib.asynccontextmanager
async def _client(plane: ControlPlane, tmp_path: Path) -> AsyncIterator[XdsClient]:
    """A client whose bootstrap defines one provider instance, ``roots``."""
    pki = make_pki(tmp_path)
    config = bootstrap([plane], node_id=NODE)
    config["certificate_providers"] = {
        "roots": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": str(pki["ca"])}}
    }
    async with XdsClient(bootstrap=config) as client:
        yield client


async def _say(channel: XdsChannel) -> str:
    reply = await EchoStub(channel).Say(Text(value="hi"), timeout=5)
    value: str = reply.value
    return value


async def test_an_unknown_instance_is_nacked_and_the_last_good_cluster_carries_calls(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """One response changes two clusters, one of them to name an instance the bootstrap lacks:
    that one is NACKed naming the field and the instance, the other applied; calls still go
    through the last good version; a later good version is ACKed."""
    async with (
        contextlib.AsyncExitStack() as stack,
        _client(plane, tmp_path) as client,
    ):
        s = EchoBackend("s")
        await s.start()
        stack.push_async_callback(s.stop)
        plane.set_all(simple("svc", [("c", [s]), ("d", [s])]))
        channel = await stack.enter_async_context(XdsChannel("xds:///svc", client=client))
        d_events = await stack.enter_async_context(client.watch(CLUSTER, "d"))
        assert isinstance(await next_event(d_events), ResourceChanged)
        assert await _say(channel) == "s:hi"
        good_c = plane.resources(CLUSTER.type_url)["c"]

        plane.set_all(
            [_naming(builders.cluster("c"), "nope"), builders.cluster("d", connect_timeout=2)]
        )
        changed = await next_event(d_events)
        assert isinstance(changed, ResourceChanged)
        assert changed.value.proto.connect_timeout.seconds == 2
        await eventually(lambda: plane.nacks(CLUSTER.type_url))
        nack = plane.nacks(CLUSTER.type_url)[0].message
        assert nack.error_detail.message == f'Cluster "c": {_FIELD}: {_UNKNOWN}'
        state = client.resource_state(CLUSTER, "c")
        assert state is not None
        assert state.status is ResourceStatus.NACKED_BUT_CACHED
        assert state.value.raw == good_c.value
        assert await _say(channel) == "s:hi"  # the last good cluster: plaintext to s

        version = plane.set(builders.cluster("c", connect_timeout=3))
        await eventually(lambda: _acked(client, version))
        assert await _say(channel) == "s:hi"
        assert s.calls[SAY] == 3


def _acked(client: XdsClient, version: str) -> bool:
    state = client.resource_state(CLUSTER, "c")
    return state is not None and state.status is ResourceStatus.ACKED and state.version == version


# --- against grpcio's own xDS client ---

_CHILD = r"""
import json, sys, grpc
out = []
for listener, method in json.loads(sys.stdin.read()):
    try:
        grpc.insecure_channel("xds:///" + listener).unary_unary(method)(b"", timeout=10)
        out.append(["SENT", ""])
    except grpc.RpcError as error:
        out.append([error.code().name, error.details()])
print(json.dumps(out), flush=True)
"""
#: a call routed to the good cluster, then one routed to the NACKed one
_CALLS = [["pair", METHOD], ["pair", "/other.Svc/M"]]


def _pair(port: int) -> list[Any]:
    """A listener routing ``METHOD`` to ``good`` and everything else to ``bad``, which names
    an instance no bootstrap here defines; both clusters are asked for in one request."""
    routes = route_config("pair-routes", domains=("pair",))
    add_route(routes.virtual_hosts[0], METHOD, "good")
    add_route(routes.virtual_hosts[0], "", "bad")
    spec = builders.LocalitySpec(endpoints=[("127.0.0.1", port)], region="r")
    return [
        listener(name="pair", rds="pair-routes"),
        routes,
        builders.cluster("good"),
        builders.cluster_load_assignment("good", [spec]),
        _naming(builders.cluster("bad"), "nope"),
        builders.cluster_load_assignment("bad", [spec]),
    ]


async def _ours(plane: ControlPlane) -> list[list[str]]:
    results = []
    async with (
        XdsClient(plane.address, node_id=f"{NODE}-ours") as client,
        XdsChannel("xds:///pair", client=client) as channel,
    ):
        for _, method in _CALLS:
            try:
                await channel.unary_unary(method)(b"", timeout=10)
                results.append(["SENT", ""])
            except grpc.aio.AioRpcError as error:
                results.append([error.code().name, error.details() or ""])
    return results


def _nacked(plane: ControlPlane, since: int) -> list[str]:
    """The CDS error details the control plane received from request ``since`` on."""
    return [
        r.message.error_detail.message
        for r in plane.requests[since:]
        if r.type_url == CLUSTER.type_url and r.message.HasField("error_detail")
    ]


@pytest.mark.timeout(60)
async def test_grpcio_nacks_the_same_cluster_for_the_same_reason_and_keeps_the_other() -> None:
    """With no ``certificate_providers`` in either bootstrap, grpcio's client and ours NACK
    the cluster naming an instance (C-core's error names the same field and instance), apply
    the other cluster of the same response, and route a call to it; a call routed to the
    NACKed cluster fails UNAVAILABLE on both."""
    async with backends(1) as ports, ControlPlane() as plane:
        plane.set_all(_pair(ports[0]))
        theirs = await run_grpcio(plane, f"{NODE}-grpc", _CHILD, (), _CALLS, timeout=40)
        their_nacks = _nacked(plane, 0)
        since = len(plane.requests)
        ours = await _ours(plane)
        await eventually(lambda: _nacked(plane, since))
        our_nacks = _nacked(plane, since)
    assert [code for code, _ in theirs] == [code for code, _ in ours] == ["SENT", "UNAVAILABLE"]
    for nacks in (their_nacks, our_nacks):
        assert nacks
        assert all("bad" in m for m in nacks), nacks
        assert not any("good" in m for m in nacks), nacks
        assert all(_UNKNOWN in m for m in nacks), nacks
        assert all("ca_certificate_provider_instance.instance_name" in m for m in nacks)
    assert our_nacks[0] == f'Cluster "bad": {_FIELD}: {_UNKNOWN}'
    core = (
        f"field:{_FIELD.replace('typed_config.', f'typed_config.value[{_TLS}].')} error:{_UNKNOWN}"
    )
    assert all(core in m for m in their_nacks), their_nacks  # C-core names the same field
    assert _UNKNOWN in theirs[1][1], theirs
    assert _UNKNOWN in ours[1][1], ours
