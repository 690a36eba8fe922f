"""Server Listener TLS against the bootstrap's certificate provider instances (gRFC A29, C-core's
decode context): with the instance names given, a filter chain's ``DownstreamTlsContext``
naming another one is rejected naming the field and the instance, as gRPC rejects it; a client
decodes listeners with its bootstrap's names, so such a listener is NACKed and the other
resources of its response are applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from tests.certs import make_pki
from tests.client.conftest import next_event
from tests.helpers import eventually
from xdsclient import DataError, ResourceChanged, ResourceDecodeError, XdsClient
from xdsclient.resources import LISTENER, ListenerView, listener_type
from xdsclient.resources._listener import decode_listener
from xdsclient.testing import ControlPlane, bootstrap

from .test_listener import server

_TLS = "filter_chains[0].transport_socket.typed_config.common_tls_context"
_DEFAULT_TLS = "default_filter_chain.transport_socket.typed_config.common_tls_context"
_IDENTITY = "tls_certificate_provider_instance.instance_name"
_CA = "validation_context.ca_certificate_provider_instance.instance_name"
_UNKNOWN = "unrecognized certificate provider instance name: nope"
PROVIDERS = frozenset({"identity", "roots"})


def _tls_server(identity: str, ca: str | None = None, *, default: bool = False) -> Any:
    """A server Listener whose one chain (or default chain) serves TLS from ``identity``,
    checking clients against ``ca`` when given."""
    message = server(None)
    context = tls_pb2.DownstreamTlsContext()
    context.common_tls_context.tls_certificate_provider_instance.instance_name = identity
    if ca is not None:
        validation = context.common_tls_context.validation_context
        validation.ca_certificate_provider_instance.instance_name = ca
        context.require_client_certificate.value = True
    chain = message.filter_chains[0]
    if default:
        message.default_filter_chain.CopyFrom(chain)
        chain = message.default_filter_chain
    chain.transport_socket.name = "envoy.transport_sockets.tls"
    chain.transport_socket.typed_config.Pack(context)
    return message


def _reason(message: Any, providers: frozenset[str] = PROVIDERS) -> str:
    with pytest.raises(ResourceDecodeError) as caught:
        listener_type(providers).decode(message.SerializeToString())
    assert caught.value.name == message.name
    return caught.value.message


def test_an_unknown_identity_instance_is_rejected_naming_the_field_and_the_instance() -> None:
    """The identity instance of a chain, and of the default chain, in C-core's words."""
    assert _reason(_tls_server("nope")) == f"{_TLS}.{_IDENTITY}: {_UNKNOWN}"
    assert _reason(_tls_server("nope", default=True)) == f"{_DEFAULT_TLS}.{_IDENTITY}: {_UNKNOWN}"


def test_an_unknown_ca_instance_is_rejected() -> None:
    """The CA instance that checks client certificates is looked up too."""
    assert _reason(_tls_server("identity", "nope")) == f"{_TLS}.{_CA}: {_UNKNOWN}"


def test_known_instances_decode_to_the_unchecked_view() -> None:
    """Instances the bootstrap defines give the same view as a decode without the check."""
    data = _tls_server("identity", "roots").SerializeToString()
    _, checked = listener_type(PROVIDERS).decode(data)
    assert checked == decode_listener(data)[1]
    chain = checked.filter_chains[0]
    assert chain.downstream_tls is not None
    assert chain.downstream_tls.identity_provider_instance == "identity"
    assert chain.downstream_tls.ca_provider_instance == "roots"


def test_a_decode_without_a_bootstrap_keeps_instance_names_unchecked() -> None:
    """`LISTENER` and `ListenerView.from_proto` without ``certificate_providers`` accept any
    instance name; a bootstrap without providers rejects every named one."""
    message = _tls_server("nope")
    assert LISTENER.decode(message.SerializeToString())[0] == "l"
    assert ListenerView.from_proto(message).filter_chains[0].downstream_tls is not None
    assert _reason(message, frozenset()).endswith(_UNKNOWN)


def test_the_bound_type_is_the_listener_type() -> None:
    """`listener_type` equals `LISTENER` (same URL, full state in SotW)."""
    assert listener_type(["roots"]) == LISTENER
    assert listener_type(["roots"]).all_resources_required_in_sotw


async def test_a_client_nacks_a_server_listener_naming_an_instance_its_bootstrap_lacks(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A client whose bootstrap defines ``identity`` and ``roots``: the listener naming
    ``nope`` is NACKed with C-core's words and its watcher told; the good listener of the same
    response is applied."""
    pki = make_pki(tmp_path)
    config = bootstrap([cp], node_id="listener-providers")
    files = {"certificate_file": str(pki["server"]), "private_key_file": str(pki["server_key"])}
    config["certificate_providers"] = {
        "identity": {"plugin_name": "file_watcher", "config": files},
        "roots": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": str(pki["ca"])}},
    }
    bad = _tls_server("nope")
    good = _tls_server("identity", "roots")
    good.name = "good"
    cp.set_all([bad, good])
    async with (
        XdsClient(bootstrap=config) as client,
        client.watch(LISTENER, "l") as bad_events,
        client.watch(LISTENER, "good") as good_events,
    ):
        assert isinstance(await next_event(good_events), ResourceChanged)
        event = await next_event(bad_events)
        assert isinstance(event, DataError)
        assert f"{_TLS}.{_IDENTITY}: {_UNKNOWN}" in str(event.error)
        await eventually(lambda: cp.nacks(LISTENER.type_url), 10, what="the listener's NACK")
        detail = cp.nacks(LISTENER.type_url)[-1].message.error_detail.message
        assert _UNKNOWN in detail
