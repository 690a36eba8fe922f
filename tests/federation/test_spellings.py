"""Any spelling of an xdstp name reaches the watchers of the resource, end to end: a watch under
one spelling goes on the wire in the form gRPC C-core requests, the control plane answers under
another spelling, and the watcher is told, over SotW and Delta alike. One case per normalisation
the names module does (empty authority, context parameter order, a repeated parameter,
percent-encoding of the authority, the id and a parameter)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from envoy.admin.v3.config_dump_shared_pb2 import ClientResourceStatus

from tests.builders import delta_resource, delta_response, listener, routes, sotw_response
from tests.client.conftest import FAST_BACKOFF, Variant, next_event
from xdsclient import ClientOptions, ResourceChanged, XdsClient, XdsConfig, load_bootstrap
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane, ReceivedRequest, bootstrap

T = "envoy.config.cluster.v3.Cluster"
EDS_NAME = "xdstp:///envoy.config.endpoint.v3.ClusterLoadAssignment/c"
OPTIONS = ClientOptions(does_not_exist_timeout=30.0, backoff=FAST_BACKOFF)
AUTHORITIES = ("", "a.example", "m-x")

#: (the name watched, the name the server answers with, the name on the wire: C-core's)
SPELLINGS = [
    pytest.param(f"xdstp:///{T}/c", f"xdstp:///{T}/c", f"xdstp:/{T}/c", id="empty-authority-A47"),
    pytest.param(f"xdstp:/{T}/c", f"xdstp:///{T}/c", f"xdstp:/{T}/c", id="empty-authority-served"),
    pytest.param(
        f"xdstp://a.example/{T}/c?b=2&a=1",
        f"xdstp://a.example/{T}/c?b=2&a=1",
        f"xdstp://a.example/{T}/c?a=1&b=2",
        id="parameter-order",
    ),
    pytest.param(
        f"xdstp://a.example/{T}/c?k=2",
        f"xdstp://a.example/{T}/c?k=1&k=2",
        f"xdstp://a.example/{T}/c?k=2",
        id="repeated-parameter",
    ),
    pytest.param(
        f"xdstp://a.example/{T}/%63",
        f"xdstp://a.example/{T}/%63",
        f"xdstp://a.example/{T}/c",
        id="needless-escape",
    ),
    pytest.param(
        f"xdstp://a.example/{T}/s%20v",
        f"xdstp://a.example/{T}/s v",
        f"xdstp://a.example/{T}/s%20v",
        id="needed-escape",
    ),
    pytest.param(
        f"xdstp://a.example/{T}/caf%c3%a9",
        f"xdstp://a.example/{T}/caf\u00e9",
        f"xdstp://a.example/{T}/caf%C3%A9",
        id="escape-case-and-utf8",
    ),
    pytest.param(
        f"xdstp://a.example/{T}/x/y",
        f"xdstp://a.example/{T}/x%2Fy",
        f"xdstp://a.example/{T}/x/y",
        id="escaped-slash-in-id",
    ),
    pytest.param(
        f"xdstp://m-x/{T}/c", f"xdstp://m%2Dx/{T}/c", f"xdstp://m-x/{T}/c", id="escaped-authority"
    ),
    pytest.param(
        f"xdstp://a.example/{T}/c?q=a/b?c",
        f"xdstp://a.example/{T}/c?q=a%2Fb%3Fc",
        f"xdstp://a.example/{T}/c?q=a/b?c",
        id="escaped-parameter",
    ),
]


def federated_cluster(name: str) -> Any:
    """A gRPC-valid EDS cluster called ``name`` (xdstp clusters need an EDS service name)."""
    from tests.builders import cluster

    message = cluster(name)
    message.eds_cluster_config.service_name = EDS_NAME
    return message


def _client(cp: ControlPlane, variant: Variant) -> XdsClient:
    authorities: dict[str, list[ControlPlane]] = {name: [] for name in AUTHORITIES}
    config = load_bootstrap(bootstrap([cp], authorities=authorities))
    return XdsClient(bootstrap=config, options=OPTIONS, **variant)


def _asked(request: ReceivedRequest) -> list[str]:
    message = request.message
    return list(getattr(message, "resource_names", None) or message.resource_names_subscribe)


async def _answer(cp: ControlPlane, variant: Variant, wire: str, served: str) -> None:
    """Wait for the request naming ``wire``, then answer it with the cluster spelled
    ``served`` (in its body, and as the Delta resource's name). The control plane is paused:
    its own answer to the request (an empty SotW state, a Delta "does not exist") would race
    this one."""
    await cp.wait_for_request(lambda r: r.type_url == CLUSTER.type_url and wire in _asked(r))
    body = federated_cluster(served)
    if variant["delta"]:
        resource = delta_resource(served, body, version="1")
        cp.send_raw(delta_response(CLUSTER.type_url, [resource], nonce="spelled"))
    else:
        cp.send_raw(sotw_response(CLUSTER.type_url, [body], version="1", nonce="spelled"))


async def _answer_to_us(cp: ControlPlane) -> ReceivedRequest:
    """The client's answer (ACK or NACK) to the response `_answer` sent."""
    return await cp.wait_for_request(lambda r: r.message.response_nonce == "spelled")


@pytest.mark.parametrize(("watched", "served", "wire"), SPELLINGS)
async def test_a_watch_is_told_of_its_resource_whatever_the_server_s_spelling(
    cp: ControlPlane, variant: Variant, watched: str, served: str, wire: str
) -> None:
    """The watch is requested in C-core's form, and the answer under another spelling is
    delivered to it under the canonical name, ACKed, found under every spelling and listed
    once by CSDS."""
    cp.pause()  # only the answer `_answer` sends: none of the store's
    async with _client(cp, variant) as client, client.watch(CLUSTER, watched) as events:
        await _answer(cp, variant, wire, served)
        event = await next_event(events)
        assert isinstance(event, ResourceChanged)
        assert (event.name, event.value.proto.name) == (wire, served)
        for spelling in (watched, served, wire):
            state = client.resource_state(CLUSTER, spelling)
            assert state is not None
            assert state.value is event.value
        assert not (await _answer_to_us(cp)).message.HasField("error_detail")  # an ACK
        assert not cp.nacks()
        csds = client.csds(include_resources=False).generic_xds_configs
        assert [(c.name, c.client_status) for c in csds] == [(wire, ClientResourceStatus.ACKED)]
    names = {n for r in cp.requests if r.type_url == CLUSTER.type_url for n in _asked(r)}
    assert names == {wire}


async def test_the_walk_follows_a_cluster_the_route_and_the_server_spell_differently(
    cp: ControlPlane, variant: Variant
) -> None:
    """A route naming its cluster as gRFC A47 writes an empty authority, a server answering in
    C-core's spelling and an EDS name in the other: the configuration completes."""
    route_spelling, served = f"xdstp:///{T}/c", f"xdstp:/{T}/c"
    cp.set(listener("l"))
    cp.set(routes(route_spelling))
    cp.set(federated_cluster(served), name=served)
    eds = ENDPOINT.type_url.removeprefix("type.googleapis.com/")
    from tests.builders import endpoints

    cp.set(endpoints(EDS_NAME), name=f"xdstp:/{eds}/c")
    async with _client(cp, variant) as client, client.watch_config("l") as watch:
        async with asyncio.timeout(10):
            async for update in watch:
                if isinstance(update, XdsConfig):
                    break
        assert isinstance(update, XdsConfig)
        assert update.clusters[route_spelling].endpoints is not None
