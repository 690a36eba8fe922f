"""`XdsChannel` security (gRFC A29): the bootstrap's ``file_watcher`` certificate providers and a
cluster's ``UpstreamTlsContext`` give endpoint channels TLS or mTLS, with certificates made in
the test and real TLS backends."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from tests.certs import make_pki
from tests.helpers import eventually
from xdsclient import BootstrapError, CertificateProviderConfig, XdsClient, load_bootstrap
from xdsclient.grpc import XdsChannel
from xdsclient.grpc._connections import Connections
from xdsclient.grpc._tls import CertificateStore, SanMatcher, Security, TlsError, TlsPolicy
from xdsclient.resources import CLUSTER, ResourceType
from xdsclient.testing import ControlPlane, FakeClock, bootstrap

from .echo import EchoBackend, EchoStub, Text, simple, until

NODE = "tls-node"


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    return make_pki(tmp_path)


@pytest.fixture
def other_pki(tmp_path: Path) -> dict[str, Path]:
    directory = tmp_path / "other"
    directory.mkdir()
    return make_pki(directory)


def _providers(pki: dict[str, Path], refresh: str = "600s") -> dict[str, Any]:
    return {
        "roots": {
            "plugin_name": "file_watcher",
            "config": {"ca_certificate_file": str(pki["ca"]), "refresh_interval": refresh},
        },
        "identity": {
            "plugin_name": "file_watcher",
            "config": {
                "certificate_file": str(pki["client"]),
                "private_key_file": str(pki["client_key"]),
                "refresh_interval": refresh,
            },
        },
    }


@contextlib.asynccontextmanager
async def _client(plane: ControlPlane, providers: dict[str, Any]) -> AsyncIterator[XdsClient]:
    config = bootstrap([plane], node_id=NODE)
    config["certificate_providers"] = providers
    async with XdsClient(bootstrap=config) as client:
        yield client


@contextlib.asynccontextmanager
async def _tls_backend(
    name: str, pki: dict[str, Path], *, client_auth: bool = False
) -> AsyncIterator[EchoBackend]:
    backend = EchoBackend(name)
    backend.credentials = grpc.ssl_server_credentials(
        [(pki["server_key"].read_bytes(), pki["server"].read_bytes())],
        root_certificates=pki["ca"].read_bytes() if client_auth else None,
        require_client_auth=client_auth,
    )
    await backend.start()
    try:
        yield backend
    finally:
        await backend.stop()


def _secured(
    resources: list[Any],
    *,
    ca: str = "roots",
    identity: str = "",
    sans: tuple[Any, ...] = (),
    deprecated: bool = False,
) -> list[Any]:
    """``resources`` (from `simple`) with their first cluster's transport socket set."""
    context = tls_pb2.UpstreamTlsContext()
    common = context.common_tls_context
    if deprecated:
        combined = common.combined_validation_context
        combined.validation_context_certificate_provider_instance.instance_name = ca
        combined.default_validation_context.match_subject_alt_names.extend(sans)
        if identity:
            common.tls_certificate_certificate_provider_instance.instance_name = identity
    else:
        common.validation_context.ca_certificate_provider_instance.instance_name = ca
        common.validation_context.match_subject_alt_names.extend(sans)
        if identity:
            common.tls_certificate_provider_instance.instance_name = identity
    cluster = resources[2]
    cluster.transport_socket.name = "envoy.transport_sockets.tls"
    cluster.transport_socket.typed_config.Pack(context)
    return resources


def _san(**fields: Any) -> Any:
    from envoy.type.matcher.v3 import string_pb2

    return string_pb2.StringMatcher(**fields)


async def _say(channel: XdsChannel, text: str = "hi", timeout: float = 5, **kwargs: Any) -> str:
    reply = await EchoStub(channel).Say(Text(value=text), timeout=timeout, **kwargs)
    value: str = reply.value
    return value


async def _refused(channel: XdsChannel) -> None:
    """The call fails UNAVAILABLE once the handshake failed, well before its deadline: the
    endpoint is in TRANSIENT_FAILURE and a call that does not wait for ready fails fast."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _say(channel, timeout=20)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE, caught.value
    assert "connections to all backends failing" in (caught.value.details() or "")


# --- bootstrap ---


def test_a_file_watcher_provider_is_read_from_the_bootstrap_with_gRPCs_default_interval() -> None:
    """A ``file_watcher`` entry becomes a `CertificateProviderConfig` on the client's config;
    ``refresh_interval`` is a duration string and defaults to ten minutes."""
    config = load_bootstrap(
        {
            "xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}]}],
            "certificate_providers": {
                "a": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/ca"}},
                "b": {
                    "plugin_name": "file_watcher",
                    "config": {
                        "certificate_file": "/c",
                        "private_key_file": "/k",
                        "refresh_interval": "2.5s",
                    },
                },
            },
        }
    )
    assert config.certificate_providers == {
        "a": CertificateProviderConfig(ca_certificate_file="/ca", refresh_interval=600.0),
        "b": CertificateProviderConfig(
            certificate_file="/c", private_key_file="/k", refresh_interval=2.5
        ),
    }


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"plugin_name": "spiffe"}, "Unrecognized plugin name: spiffe"),
        ({"config": {}}, "plugin_name: required"),
        (
            {"plugin_name": "file_watcher", "config": {"certificate_file": "/c"}},
            '"certificate_file" and "private_key_file" must be both set or both unset',
        ),
        (
            {"plugin_name": "file_watcher", "config": {}},
            'at least one of "certificate_file" and "ca_certificate_file" must be specified',
        ),
        (
            {
                "plugin_name": "file_watcher",
                "config": {"ca_certificate_file": "/ca", "refresh_interval": 5},
            },
            "refresh_interval: must be a duration string",
        ),
        ({"plugin_name": "file_watcher", "config": []}, "config: must be an object"),
    ],
)
def test_a_provider_gRPC_rejects_fails_the_bootstrap_naming_the_field(
    entry: dict[str, Any], message: str
) -> None:
    """An unknown plugin, a missing plugin name, a certificate without its key, no file at all
    or a bad interval fail the whole bootstrap, as C-core's bootstrap does."""
    with pytest.raises(BootstrapError, match="certificate_providers\\['p'\\]") as caught:
        load_bootstrap(
            {
                "xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}]}],
                "certificate_providers": {"p": entry},
            }
        )
    assert message in str(caught.value)


# --- the store: re-reads decided by time ---


def test_the_store_rereads_files_only_once_the_refresh_interval_has_passed(
    pki: dict[str, Path], other_pki: dict[str, Path]
) -> None:
    """The CA file is read at first use, not again before ``refresh_interval`` has passed (a
    rotated file is not seen), and read again after it; a failed read keeps the last good
    certificates."""
    clock = FakeClock()
    config = CertificateProviderConfig(ca_certificate_file=str(pki["ca"]), refresh_interval=10)
    store = CertificateStore({"roots": config})
    policy = TlsPolicy(ca_instance="roots")
    first = pki["ca"].read_bytes()
    assert store.security(policy, clock.time()).root == first
    pki["ca"].write_bytes(other_pki["ca"].read_bytes())
    clock.advance(9.9)
    assert store.security(policy, clock.time()).root == first
    clock.advance(0.1)
    assert store.security(policy, clock.time()).root == other_pki["ca"].read_bytes()
    pki["ca"].unlink()
    clock.advance(10)
    assert store.security(policy, clock.time()).root == other_pki["ca"].read_bytes()


def test_the_store_refuses_an_instance_without_what_it_is_used_for(pki: dict[str, Path]) -> None:
    """An identity from a provider with only a CA file, a CA from one with only an identity,
    and an instance the bootstrap lacks each raise `TlsError` naming the instance."""
    store = CertificateStore(
        {
            "roots": CertificateProviderConfig(ca_certificate_file=str(pki["ca"])),
            "identity": CertificateProviderConfig(
                certificate_file=str(pki["client"]), private_key_file=str(pki["client_key"])
            ),
        }
    )
    with pytest.raises(TlsError, match="'roots' has no identity certificate"):
        store.security(TlsPolicy(ca_instance="roots", identity_instance="roots"), 0)
    with pytest.raises(TlsError, match="'identity' has no CA certificate"):
        store.security(TlsPolicy(ca_instance="identity"), 0)
    with pytest.raises(TlsError, match="unrecognized certificate provider instance name: x"):
        store.security(TlsPolicy(ca_instance="x"), 0)


# --- channels ---


async def test_a_cluster_with_a_ca_provider_calls_its_tls_backend(
    plane: ControlPlane, pki: dict[str, Path]
) -> None:
    """A cluster whose validation context names the CA provider reaches a TLS backend; the
    same backend behind a plaintext cluster cannot be reached."""
    async with _client(plane, _providers(pki)) as client, _tls_backend("a", pki) as a:
        plane.set_all(_secured(simple("svc", [("c", [a])])))
        async with XdsChannel("xds:///svc", client=client) as channel:
            assert await _say(channel) == "a:hi"
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            await _refused(channel)


async def test_a_cluster_without_a_transport_socket_uses_the_fallback_credentials(
    plane: ControlPlane, pki: dict[str, Path]
) -> None:
    """With ``fallback_credentials``, a cluster that asks for no TLS reaches a TLS backend
    with them (A29's fallback); without, the same cluster is plaintext and cannot."""
    async with _client(plane, {}) as client, _tls_backend("f", pki) as f:
        plane.set_all(simple("svc", [("c", [f])]))
        fallback = grpc.ssl_channel_credentials(pki["ca"].read_bytes())
        async with XdsChannel(
            "xds:///svc", client=client, fallback_credentials=fallback
        ) as channel:
            assert await _say(channel) == "f:hi"
        async with XdsChannel("xds:///svc", client=client) as channel:
            with pytest.raises(grpc.aio.AioRpcError):
                await _say(channel, timeout=1)
    assert f.calls["/echo.Echo/Say"] == 1


async def test_an_mtls_backend_takes_the_identity_providers_certificate(
    plane: ControlPlane, pki: dict[str, Path]
) -> None:
    """A backend that requires a client certificate accepts calls from a cluster with a
    ``tls_certificate_provider_instance`` (and with the deprecated
    ``..._certificate_provider_instance`` fields C-core still reads), and refuses them from a
    cluster without one."""
    async with (
        _client(plane, _providers(pki)) as client,
        _tls_backend("m", pki, client_auth=True) as m,
    ):
        for deprecated in (False, True):
            plane.set_all(
                _secured(simple("svc", [("c", [m])]), identity="identity", deprecated=deprecated)
            )
            async with XdsChannel("xds:///svc", client=client) as channel:
                assert await _say(channel) == "m:hi"
        plane.set_all(_secured(simple("svc", [("c", [m])])))
        async with XdsChannel("xds:///svc", client=client) as channel:
            await _refused(channel)
    assert m.calls["/echo.Echo/Say"] == 2


async def test_a_server_certificate_from_another_ca_is_refused(
    plane: ControlPlane, pki: dict[str, Path], other_pki: dict[str, Path]
) -> None:
    """A backend whose certificate another CA signed never gets the call."""
    async with _client(plane, _providers(pki)) as client, _tls_backend("w", other_pki) as w:
        plane.set_all(_secured(simple("svc", [("c", [w])])))
        async with XdsChannel("xds:///svc", client=client) as channel:
            await _refused(channel)
    assert not w.calls


async def test_one_exact_san_matcher_is_checked_against_the_server_certificate(
    plane: ControlPlane, pki: dict[str, Path]
) -> None:
    """An exact matcher the certificate carries (``localhost``) lets the call through; one it
    does not carry refuses the backend."""
    async with _client(plane, _providers(pki)) as client, _tls_backend("s", pki) as s:
        plane.set_all(_secured(simple("svc", [("c", [s])]), sans=(_san(exact="localhost"),)))
        async with XdsChannel("xds:///svc", client=client) as channel:
            assert await _say(channel) == "s:hi"
        plane.set_all(_secured(simple("svc", [("c", [s])]), sans=(_san(exact="other.test"),)))
        async with XdsChannel("xds:///svc", client=client) as channel:
            await _refused(channel)
    assert s.calls["/echo.Echo/Say"] == 1


@pytest.mark.parametrize(
    ("sans", "why"),
    [
        (
            (_san(prefix="local"),),
            "match_subject_alt_names prefix 'local' cannot be checked: grpcio verifies one exact "
            "name",
        ),
        (
            (_san(exact="localhost", ignore_case=True),),
            "match_subject_alt_names exact with ignore_case 'localhost' cannot be checked: grpcio "
            "verifies one exact name",
        ),
        (
            (_san(exact="a"), _san(exact="b")),
            "2 match_subject_alt_names cannot be checked: grpcio verifies one name",
        ),
        (
            (_san(exact="spiffe://td/ns/a"),),
            "match_subject_alt_names exact 'spiffe://td/ns/a' cannot be checked: grpcio verifies "
            "DNS names and IP addresses only",
        ),
    ],
)
async def test_san_matchers_grpcio_cannot_check_fail_the_call_instead_of_being_skipped(
    plane: ControlPlane, pki: dict[str, Path], sans: tuple[Any, ...], why: str
) -> None:
    """Matchers grpcio's Python API cannot enforce fail the cluster's calls UNAVAILABLE,
    naming the matcher, and no connection is made."""
    async with _client(plane, _providers(pki)) as client, _tls_backend("s", pki) as s:
        plane.set_all(_secured(simple("svc", [("c", [s])]), sans=sans))
        async with XdsChannel("xds:///svc", client=client) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _say(channel)
            assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
            assert caught.value.details() == (
                f"CDS resource c: invalid resource: {why} (node ID:{NODE})"
            )
            assert not channel._core.connections
    assert not s.calls


async def test_a_provider_instance_the_bootstrap_lacks_fails_the_clusters_calls(
    plane: ControlPlane, pki: dict[str, Path]
) -> None:
    """A cluster naming an instance the bootstrap does not define is NACKed at decode, as C-core
    does: with no good version before it, its calls fail UNAVAILABLE with C-core's words for an
    invalid cluster, naming the field and the instance."""
    async with _client(plane, _providers(pki)) as client, _tls_backend("s", pki) as s:
        plane.set_all(_secured(simple("svc", [("c", [s])]), ca="nope"))
        async with XdsChannel("xds:///svc", client=client) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _say(channel)
        # the call fails on the client's verdict; its NACK may still be on the way
        await eventually(lambda: plane.nacks(CLUSTER.type_url))
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    assert caught.value.details() == (
        "CDS resource c: invalid resource: transport_socket.typed_config.common_tls_context."
        "validation_context.ca_certificate_provider_instance.instance_name: unrecognized "
        f"certificate provider instance name: nope (node ID:{NODE})"
    )
    assert not s.calls


async def test_an_unchecked_cluster_type_leaves_the_unknown_instance_to_the_channel(
    plane: ControlPlane, pki: dict[str, Path]
) -> None:
    """A client given a CLUSTER decoder of its own that does not check instance names (here
    the bootstrap-free decoder of `CLUSTER`) ACKs the cluster; the channel still refuses it: its
    calls fail UNAVAILABLE and its endpoints are never connected."""
    config = bootstrap([plane], node_id=NODE)
    config["certificate_providers"] = _providers(pki)
    unchecked = ResourceType(
        type_url=CLUSTER.type_url, decode=CLUSTER.decode, all_resources_required_in_sotw=True
    )
    async with (
        XdsClient(bootstrap=config, resource_types=[unchecked]) as client,
        _tls_backend("s", pki) as s,
    ):
        plane.set_all(_secured(simple("svc", [("c", [s])]), ca="nope"))
        async with XdsChannel("xds:///svc", client=client) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _say(channel)
        assert not plane.nacks(CLUSTER.type_url)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    assert caught.value.details() == (
        "CDS resource c: invalid resource: ca_certificate_provider_instance: unrecognized "
        f"certificate provider instance name: nope (node ID:{NODE})"
    )
    assert not s.calls


async def test_rotated_certificate_files_reach_connections_after_the_refresh_interval(
    plane: ControlPlane, pki: dict[str, Path], other_pki: dict[str, Path]
) -> None:
    """The CA file rotated to a new CA (whose server the assignment now lists) is not read
    before ``refresh_interval`` has passed on the channel's clock, so the new backend is
    refused; once it has, the failing connection is remade with the new roots and calls
    succeed."""
    clock = FakeClock()
    async with (
        _client(plane, _providers(pki, refresh="30s")) as client,
        _tls_backend("old", pki) as old,
        _tls_backend("new", other_pki) as new,
    ):
        plane.set_all(_secured(simple("svc", [("c", [old])])))
        options = [
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 200),
        ]
        channel = XdsChannel("xds:///svc", client=client, channel_options=options)
        channel._core.clock = clock.time
        async with channel:
            assert await _say(channel) == "old:hi"
            pki["ca"].write_bytes(other_pki["ca"].read_bytes())
            plane.set_all(_secured(simple("svc", [("c", [new])])))
            await until(lambda: ("127.0.0.1", new.port) in channel._core.connections)
            clock.advance(29)
            with pytest.raises(grpc.aio.AioRpcError):
                await _say(channel, timeout=1)
            assert not new.calls
            clock.advance(1)
            reply = await _say(channel, "rotated", timeout=5, wait_for_ready=True)
            assert reply == "new:rotated"


# --- connections ---


@pytest.mark.timeout(10)
async def test_one_address_under_two_policies_gets_two_channels_and_new_certificates_a_new_one(
    pki: dict[str, Path], other_pki: dict[str, Path]
) -> None:
    """The same endpoint in plaintext, under one TLS policy and under another is three
    connections; a connect that gets other certificates for a policy replaces its connection,
    and the old one closes (it had no calls)."""
    roots = [pki["ca"].read_bytes()]
    connections = Connections(
        lambda key, state: None, secure=lambda policy: Security(root=roots[-1])
    )
    key = ("127.0.0.1", 9)
    strict = TlsPolicy(ca_instance="roots", san_matchers=(SanMatcher(kind="exact", value="a"),))
    plain = connections.connect(key)
    first = connections.connect(key, TlsPolicy(ca_instance="roots"))
    assert connections.connect(key, strict) not in (plain, first)
    assert len(connections) == 3
    assert connections.connect(key, TlsPolicy(ca_instance="roots")) is first
    roots.append(other_pki["ca"].read_bytes())
    second = connections.connect(key, TlsPolicy(ca_instance="roots"))
    assert second is not first
    assert second.security == Security(root=other_pki["ca"].read_bytes())
    assert len(connections) == 3
    await until(lambda: first.channel.get_state() is grpc.ChannelConnectivity.SHUTDOWN)
    assert second.channel.get_state() is not grpc.ChannelConnectivity.SHUTDOWN
    await connections.close()
    assert len(connections) == 0
