"""Bootstrap ``authorities`` and listener name templates, read as gRPC reads them (gRFC A47)."""

from __future__ import annotations

from typing import Any

import pytest

from xdsclient import BootstrapError, load_bootstrap
from xdsclient._names import OLD_AUTHORITY
from xdsclient._settings._targets import listener_for

LDS_TYPE = "envoy.config.listener.v3.Listener"
TOP = {"server_uri": "top:1", "channel_creds": [{"type": "insecure"}]}
OTHER = {"server_uri": "other:1", "channel_creds": [{"type": "insecure"}]}
BACKUP = {"server_uri": "backup:1", "channel_creds": [{"type": "insecure"}]}


def _bootstrap(**fields: Any) -> dict[str, Any]:
    return {"xds_servers": [TOP], **fields}


def test_an_authority_without_servers_uses_the_top_level_ones() -> None:
    config = load_bootstrap(_bootstrap(authorities={"a.example": {}}))
    assert [s.uri for s in config.servers_of("a.example") or ()] == ["top:1"]
    assert [s.uri for s in config.servers_of(OLD_AUTHORITY) or ()] == ["top:1"]


def test_an_authority_with_servers_uses_them_in_order() -> None:
    config = load_bootstrap(
        _bootstrap(
            authorities={"b.example": {"xds_servers": [OTHER, BACKUP]}, "e": {"xds_servers": []}}
        )
    )
    assert [s.uri for s in config.servers_of("b.example") or ()] == ["other:1", "backup:1"]
    assert [s.uri for s in config.servers_of("e") or ()] == ["top:1"]  # empty = top-level


def test_an_unconfigured_authority_has_no_servers() -> None:
    assert load_bootstrap(_bootstrap()).servers_of("nowhere") is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"authorities": []}, r"authorities: must be an object"),
        ({"authorities": {"a": 1}}, r"authorities\['a'\]: must be an object"),
        (
            {"authorities": {"a": {"xds_servers": {}}}},
            r"authorities\['a'\]\.xds_servers: must be an array",
        ),
        (
            {"authorities": {"a": {"xds_servers": [{"server_uri": ""}]}}},
            r"authorities\['a'\]\.xds_servers\[0\]",
        ),
        (
            {"authorities": {"a": {"client_listener_resource_name_template": "xdstp://b/x/%s"}}},
            r"client_listener_resource_name_template: must start with 'xdstp://a/'",
        ),
        ({"client_default_listener_resource_name_template": 3}, r"must be a string"),
    ],
)
def test_bad_authority_fields_fail_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(BootstrapError, match=message):
        load_bootstrap(_bootstrap(**fields))


def test_a_plain_target_uses_the_default_template_and_is_its_own_virtual_host() -> None:
    config = load_bootstrap(_bootstrap())
    assert listener_for(config, "svc.ns:80") == ("svc.ns:80", "svc.ns:80")
    assert listener_for(config, "xds:///svc") == ("svc", "svc")


def test_an_xdstp_default_template_percent_encodes_the_target() -> None:
    template = f"xdstp://a.example/{LDS_TYPE}/grpc/client/%s?project_id=1234"
    config = load_bootstrap(
        _bootstrap(
            client_default_listener_resource_name_template=template,
            authorities={"a.example": {}},
        )
    )
    assert listener_for(config, "server example") == (
        f"xdstp://a.example/{LDS_TYPE}/grpc/client/server%20example?project_id=1234",
        "server example",
    )


def test_a_target_with_an_authority_uses_that_authority_s_template() -> None:
    template = f"xdstp://a.example/{LDS_TYPE}/grpc/client/%s?project_id=1234"
    config = load_bootstrap(
        _bootstrap(
            authorities={
                "a.example": {"client_listener_resource_name_template": template},
                "b.example": {"xds_servers": [OTHER]},
            }
        )
    )
    assert listener_for(config, "xds://a.example/server.example.com") == (
        f"xdstp://a.example/{LDS_TYPE}/grpc/client/server.example.com?project_id=1234",
        "server.example.com",
    )
    assert listener_for(config, "xds://b.example/server.other.com") == (
        f"xdstp://b.example/{LDS_TYPE}/server.other.com",
        "server.other.com",
    )


def test_a_target_naming_an_unconfigured_authority_is_refused() -> None:
    config = load_bootstrap(_bootstrap())
    with pytest.raises(BootstrapError, match=r"does not configure the authority 'x\.example'"):
        listener_for(config, "xds://x.example/svc")


def test_an_xdstp_name_is_used_as_the_listener_name() -> None:
    config = load_bootstrap(_bootstrap())
    name = f"xdstp://a/{LDS_TYPE}/svc"
    assert listener_for(config, name) == (name, name)
