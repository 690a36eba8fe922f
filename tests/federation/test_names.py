"""xdstp:// names (xDS TP1, gRFC A47): parsing, canonical form, type checks, templates."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdsclient import InvalidNameError, XdstpName
from xdsclient._names import OLD_AUTHORITY, authority_of
from xdsclient._xdstp import canonical_name, expand_template
from xdsclient.resources import CLUSTER, LISTENER

LDS_TYPE = "envoy.config.listener.v3.Listener"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            f"xdstp://mesh.example/{LDS_TYPE}/svc",
            XdstpName("mesh.example", LDS_TYPE, "svc"),
        ),
        (f"xdstp:///{LDS_TYPE}/svc", XdstpName("", LDS_TYPE, "svc")),
        (
            f"xdstp://a/{LDS_TYPE}/grpc/client/svc?b=2&a=1",
            XdstpName("a", LDS_TYPE, "grpc/client/svc", (("a", "1"), ("b", "2"))),
        ),
        (f"xdstp://a/{LDS_TYPE}/s%20v%2Fc", XdstpName("a", LDS_TYPE, "s v/c")),
        (f"xdstp://a/{LDS_TYPE}/x?k=1&k=2", XdstpName("a", LDS_TYPE, "x", (("k", "2"),))),
        (f"xdstp://a/{LDS_TYPE}/x?k=", XdstpName("a", LDS_TYPE, "x", (("k", ""),))),
    ],
)
def test_names_parse_into_their_parts(name: str, expected: XdstpName) -> None:
    assert XdstpName.parse(name) == expected


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        (f"xdstp://a/{LDS_TYPE}/x?z=1&a=2", f"xdstp://a/{LDS_TYPE}/x?a=2&z=1"),
        (f"xdstp://a/{LDS_TYPE}/%78", f"xdstp://a/{LDS_TYPE}/x"),  # needless escape removed
        (f"xdstp://a/{LDS_TYPE}/a%2fb", f"xdstp://a/{LDS_TYPE}/a/b"),
        (f"xdstp://a/{LDS_TYPE}/s v", f"xdstp://a/{LDS_TYPE}/s%20v"),
        (f"xdstp://a/{LDS_TYPE}/x?q=a%26b", f"xdstp://a/{LDS_TYPE}/x?q=a%26b"),
    ],
)
def test_two_spellings_of_one_name_have_one_canonical_form(name: str, canonical: str) -> None:
    assert canonical_name(name, LISTENER.type_url) == canonical


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("xdstp://a", "no resource type"),
        ("xdstp://a/", "no resource type"),
        (f"xdstp://a/{LDS_TYPE}", "no resource id"),
        (f"xdstp://a/{LDS_TYPE}/", "no resource id"),
        (f"xdstp://a/{LDS_TYPE}/x%2", "bad percent-encoding"),
        (f"xdstp://a/{LDS_TYPE}/x%zz", "bad percent-encoding"),
        (f"xdstp://a/{LDS_TYPE}/x%ff", "not UTF-8"),
        (f"xdstp://a/{LDS_TYPE}/x?novalue", "not key=value"),
        (f"xdstp://a/{LDS_TYPE}/x?=v", "not key=value"),
        (f"xdstp://a/{LDS_TYPE}/x#alt=y", "processing directives"),
        ("http://a/b/c", "not an xdstp:// name"),
    ],
)
def test_malformed_names_are_refused_saying_why(name: str, message: str) -> None:
    with pytest.raises(InvalidNameError, match=message):
        XdstpName.parse(name)


def test_a_name_of_another_type_is_refused() -> None:
    with pytest.raises(InvalidNameError, match=f"type {LDS_TYPE}, not envoy.config.cluster"):
        canonical_name(f"xdstp://a/{LDS_TYPE}/x", CLUSTER.type_url)


def test_old_style_names_are_left_as_they_are_and_belong_to_the_old_authority() -> None:
    assert canonical_name("a b?c", CLUSTER.type_url) == "a b?c"
    assert authority_of("a b?c") == OLD_AUTHORITY


def test_the_authority_of_a_name_is_decoded() -> None:
    assert authority_of(f"xdstp://m%2Dx/{LDS_TYPE}/x") == "m-x"
    assert authority_of(f"xdstp:///{LDS_TYPE}/x") == ""
    assert authority_of(f"xdstp:/{LDS_TYPE}/x") == ""


# Each canonical form below is the name grpcio 1.85 (gRPC C-core) requested for the same input
# (the listener template or target of a bootstrap; test_grpc_reference.py checks it live).
_ALL = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in "/?#") + "\u00e9"


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        (
            f"xdstp://a/{LDS_TYPE}/shard%3D1%26tier%3Dgold",
            f"xdstp://a/{LDS_TYPE}/shard=1&tier=gold",
        ),
        (f"xdstp://a/{LDS_TYPE}/svc%3Dv1", f"xdstp://a/{LDS_TYPE}/svc=v1"),
        (
            f"xdstp://a/{LDS_TYPE}/x/a%26b%3Dc%3Ad%40e%21%24x%28y%29%2A%2B%2C%3Bz",
            f"xdstp://a/{LDS_TYPE}/x/a&b=c:d@e!$x(y)*+,;z",
        ),
        (
            f"xdstp://a/{LDS_TYPE}/" + urllib.parse.quote(_ALL + "/?", safe=""),
            f"xdstp://a/{LDS_TYPE}/%20!%22$%25&'()*+,-.0123456789:;%3C=%3E@ABCDEFGHIJKLMNOPQRSTU"
            "VWXYZ%5B%5C%5D%5E_%60abcdefghijklmnopqrstuvwxyz%7B%7C%7D~%C3%A9/%3F",
        ),
        (
            f"xdstp://{urllib.parse.quote(_ALL, safe='')}/{LDS_TYPE}/x",
            "xdstp://%20!%22$%25&'()*+,-.0123456789:;%3C=%3E%40ABCDEFGHIJKLMNOPQRSTUVWXYZ[%5C]"
            f"%5E_%60abcdefghijklmnopqrstuvwxyz%7B%7C%7D~%C3%A9/{LDS_TYPE}/x",
        ),
        (
            f"xdstp://a/{LDS_TYPE}/x?k=" + urllib.parse.quote(_ALL + "/?#", safe=""),
            f"xdstp://a/{LDS_TYPE}/x?k=%20!%22$%25%26'()*+,-.0123456789:;%3C%3D%3E@ABCDEFGHIJ"
            "KLMNOPQRSTUVWXYZ%5B%5C%5D%5E_%60abcdefghijklmnopqrstuvwxyz%7B%7C%7D~%C3%A9/?%23",
        ),
        (
            f"xdstp://a/{LDS_TYPE}/x?z=1&a=%41&k=v1&k=v2&q=a/b?c:d@e!$(*)+,;&e=",
            f"xdstp://a/{LDS_TYPE}/x?a=A&e=&k=v2&q=a/b?c:d@e!$(*)+,;&z=1",
        ),
        (f"xdstp://a%5Bb%5D/{LDS_TYPE}/x", f"xdstp://a[b]/{LDS_TYPE}/x"),
        (f"xdstp://a:b@c/{LDS_TYPE}/x", f"xdstp://a:b%40c/{LDS_TYPE}/x"),
        (f"xdstp:///{LDS_TYPE}/x", f"xdstp:/{LDS_TYPE}/x"),  # C-core prints no empty authority
        (f"xdstp:/{LDS_TYPE}/x", f"xdstp:/{LDS_TYPE}/x"),
        (f"xdstp://a/{LDS_TYPE}/%7e%41%2d/x", f"xdstp://a/{LDS_TYPE}/~A-/x"),
    ],
)
def test_names_are_encoded_byte_for_byte_as_grpc_c_core_encodes_them(
    name: str, canonical: str
) -> None:
    assert canonical_name(name, LISTENER.type_url) == canonical


@pytest.mark.parametrize(
    ("template", "target", "expected"),
    [
        ("%s", "svc.ns:80", "svc.ns:80"),
        ("%s", "a b", "a b"),  # old-style templates take the target as it is
        (f"xdstp://a/{LDS_TYPE}/%s", "svc/x y", f"xdstp://a/{LDS_TYPE}/svc/x%20y"),
        (f"xdstp://a/{LDS_TYPE}/c/%s?p=1", "s?&", f"xdstp://a/{LDS_TYPE}/c/s%3F&?p=1"),
        (
            f"xdstp://a/{LDS_TYPE}/%s",
            "shard=1&tier=gold",
            f"xdstp://a/{LDS_TYPE}/shard=1&tier=gold",
        ),
        ("prefix-%s-suffix", "svc", "prefix-svc-suffix"),
    ],
)
def test_templates_substitute_the_target(template: str, target: str, expected: str) -> None:
    assert expand_template(template, target) == expected


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=12)
_names = st.builds(
    XdstpName,
    authority=_text,
    resource_type=st.sampled_from([LDS_TYPE, "envoy.config.cluster.v3.Cluster"]),
    id=_text.filter(bool),
    context=st.dictionaries(_text.filter(bool), _text, max_size=3).map(
        lambda d: tuple(sorted(d.items()))
    ),
)


@given(_names)
def test_a_printed_name_parses_back_to_itself(name: XdstpName) -> None:
    text = str(name)
    assert XdstpName.parse(text) == name
    assert str(XdstpName.parse(text)) == text


_URI_TEXT = st.text(st.sampled_from("aZ09-._~!$&'()*+,;=:@[]/%?# \u00e9"), max_size=8)


def _parsed_form(name: str, type_url: str) -> str | None:
    try:
        parsed = XdstpName.parse(name)
    except InvalidNameError:
        return None
    return str(parsed) if parsed.type_url == type_url else None


@given(
    _URI_TEXT,
    st.sampled_from([LDS_TYPE, "envoy.config.cluster.v3.Cluster", "envoy.config.cluster.v3.x"]),
    _URI_TEXT,
)
def test_a_name_taken_as_it_is_is_the_one_the_parser_prints(
    authority: str, resource_type: str, id_: str
) -> None:
    """The quick path of `canonical_name` (a name that is already canonical) agrees with the
    parser on every name: same canonical form, same refusals."""
    name = f"xdstp://{authority}/{resource_type}/{id_}"
    try:
        quick: str | None = canonical_name(name, CLUSTER.type_url)
    except InvalidNameError:
        quick = None
    assert quick == _parsed_form(name, CLUSTER.type_url)
