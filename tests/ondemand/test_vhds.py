"""VHDS: virtual hosts on demand over Delta, named ``<route configuration name>/<host>``
(split right to left), answered under their aliases, Missing for a host the server does not
know, and refused with a clear error on SotW."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from envoy.config.route.v3 import route_components_pb2

from tests.builders import delta_resource, delta_response
from xdsclient import (
    Available,
    DataError,
    Missing,
    ResourceChanged,
    ResourceDoesNotExistError,
    XdsClient,
)
from xdsclient.resources import VIRTUAL_HOST, VirtualHostView, split_vhds_name, vhds_name
from xdsclient.testing import FakeTransport


def vhost(name: str, *domains: str) -> Any:
    message = route_components_pb2.VirtualHost(name=name, domains=list(domains))
    route = message.routes.add()
    route.match.prefix = "/"
    route.route.cluster = "backend"
    return message


@pytest.mark.parametrize(
    ("name", "route_config", "host"),
    [
        ("routes/example.com", "routes", "example.com"),
        ("a/b/c/example.com:8080", "a/b/c", "example.com:8080"),
        (
            "xdstp://auth/envoy.config.route.v3.RouteConfiguration/r/x.io",
            "xdstp://auth/envoy.config.route.v3.RouteConfiguration/r",
            "x.io",
        ),
    ],
)
def test_a_vhds_name_splits_at_its_last_slash(name: str, route_config: str, host: str) -> None:
    """The host holds no slash, the route configuration name may: split right to left."""
    assert split_vhds_name(name) == (route_config, host)
    assert vhds_name(route_config, host) == name


@pytest.mark.parametrize("name", ["example.com", "/example.com", "routes/"])
def test_a_name_without_both_parts_is_not_a_vhds_name(name: str) -> None:
    """A name with no slash, or an empty part, is refused."""
    with pytest.raises(ValueError, match="not a VHDS name"):
        split_vhds_name(name)


def test_a_host_with_a_slash_makes_no_vhds_name() -> None:
    """A host cannot hold a slash (the split would be ambiguous)."""
    with pytest.raises(ValueError, match="no '/'"):
        vhds_name("routes", "a/b")


def test_a_virtual_host_is_validated_as_in_a_route_configuration() -> None:
    """The view reuses the route decoder's rules: a virtual host needs domains."""
    from xdsclient import ResourceDecodeError

    view = VIRTUAL_HOST.decode(vhost("routes/vh", "example.com").SerializeToString())[1]
    assert isinstance(view, VirtualHostView)
    assert view.virtual_host.domains == ("example.com",)
    assert view.virtual_host.routes[0].action is not None
    assert view.virtual_host.routes[0].action.cluster == "backend"
    assert view.proto.name == "routes/vh"
    with pytest.raises(ResourceDecodeError, match="domains"):
        VIRTUAL_HOST.decode(vhost("routes/vh").SerializeToString())


async def test_vhds_on_a_sotw_client_is_an_error_naming_delta(fake: FakeTransport) -> None:
    """VHDS exists only in Delta xDS: watching or resolving a virtual host over SotW says so."""
    async with XdsClient("fake:1", node_id="n", transport=fake) as client:
        with pytest.raises(ValueError, match="Delta"):
            client.watch_virtual_host("routes", "example.com")
        with pytest.raises(ValueError, match="Delta"):
            await client.resolve(VIRTUAL_HOST, "routes/example.com")


async def test_a_virtual_host_arrives_under_the_alias_it_was_asked_by(
    fake: FakeTransport, delta_client: XdsClient
) -> None:
    """The server names the resource by its virtual host and lists the host asked for in its
    aliases; the watch of that host gets it."""
    async with delta_client.watch_virtual_host("a/routes", "example.com") as events:
        stream = await fake.stream()
        request = await stream.request()
        assert list(request.resource_names_subscribe) == ["a/routes/example.com"]
        resource = delta_resource(
            "a/routes/vh",
            vhost("a/routes/vh", "example.com"),
            version="1",
            aliases=("a/routes/example.com",),
        )
        stream.respond(delta_response(VIRTUAL_HOST.type_url, [resource], nonce="n1"))
        event = await anext(events)
    assert isinstance(event, ResourceChanged)
    assert event.name == "a/routes/example.com"
    assert event.value.virtual_host.domains == ("example.com",)


async def test_an_unknown_host_answered_with_no_body_is_missing(
    fake: FakeTransport, delta_client: XdsClient
) -> None:
    """The server's answer for a host it does not know (the name and alias of the host, no
    body) is Missing for a resolve and a data error for a watch."""
    task = asyncio.ensure_future(delta_client.resolve(VIRTUAL_HOST, "routes/nope.io"))
    stream = await fake.stream()
    await stream.request()
    resource = delta_resource("routes/nope.io", None, version="", aliases=("routes/nope.io",))
    stream.respond(delta_response(VIRTUAL_HOST.type_url, [resource], nonce="n1"))
    outcome = await task
    assert isinstance(outcome, Missing)
    assert outcome.error.name == "routes/nope.io"
    async with delta_client.watch_virtual_host("routes", "nope.io") as events:
        event = await anext(events)
    assert isinstance(event, DataError)
    assert isinstance(event.error, ResourceDoesNotExistError)


async def test_a_known_host_resolves_to_its_virtual_host(
    fake: FakeTransport, delta_client: XdsClient
) -> None:
    """A resolve of a host answered under its alias is Available with the view."""
    task = asyncio.ensure_future(delta_client.resolve(VIRTUAL_HOST, "routes/x.io"))
    stream = await fake.stream()
    await stream.request()
    resource = delta_resource(
        "routes/vh", vhost("routes/vh", "x.io"), version="1", aliases=("routes/x.io",)
    )
    stream.respond(delta_response(VIRTUAL_HOST.type_url, [resource], nonce="n1"))
    outcome = await task
    assert isinstance(outcome, Available)
    assert outcome.view.virtual_host.name == "routes/vh"


def route_config(name: str, version_marker: str) -> Any:
    """A route configuration whose virtual hosts come from VHDS (``vhds`` set)."""
    from envoy.config.route.v3 import route_pb2

    message = route_pb2.RouteConfiguration(name=name)
    message.vhds.config_source.ads.SetInParent()
    message.request_headers_to_add.add().header.key = version_marker  # a change of content
    return message


async def test_a_route_configuration_change_clears_its_virtual_host_table(
    fake: FakeTransport, delta_client: XdsClient
) -> None:
    """After the route configuration changes, a resolve of a virtual host held for it waits
    for the server to send it again (even byte-equal) instead of answering from before."""
    from tests.helpers import eventually
    from xdsclient.resources import ROUTE_CONFIGURATION

    client = delta_client
    name = "a/routes/x.io"
    first = asyncio.ensure_future(client.resolve(VIRTUAL_HOST, name))
    stream = await fake.stream()
    asked = {
        (r.type_url, n)
        for r in [await stream.request(), await stream.request()]
        for n in r.resource_names_subscribe
    }
    assert asked == {(VIRTUAL_HOST.type_url, name), (ROUTE_CONFIGURATION.type_url, "a/routes")}
    stream.send([route_config("a/routes", "v1")])
    resource = delta_resource(
        "a/routes/vh", vhost("a/routes/vh", "x.io"), version="1", aliases=(name,)
    )
    stream.respond(delta_response(VIRTUAL_HOST.type_url, [resource], nonce="v1"))
    assert isinstance(await first, Available)
    assert isinstance(await client.resolve(VIRTUAL_HOST, name), Available)  # from the hold

    stream.send([route_config("a/routes", "v2")], version="2")
    book = client._resolver.book
    await eventually(lambda: book.known(VIRTUAL_HOST.type_url, name) is None)
    second = asyncio.ensure_future(client.resolve(VIRTUAL_HOST, name))
    key = (VIRTUAL_HOST.type_url, name)
    await eventually(lambda: len(client._resolver._waiters.get(key, [])) == 1)
    assert not second.done()
    stream.respond(delta_response(VIRTUAL_HOST.type_url, [resource], nonce="again"))
    outcome = await second
    assert isinstance(outcome, Available)
    assert outcome.view.virtual_host.domains == ("x.io",)
