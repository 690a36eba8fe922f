"""TLS for the HTTP front end: a cluster's ``UpstreamTlsContext`` read into a `TlsPolicy`, its
subject-alt-name matchers by Envoy's rules, and real handshakes with hypercorn backends and
certificates made in the test (TLS, mTLS, SNI, ALPN, rotation, a wrong SAN refused)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2

from tests.builders import cluster
from xdsclient import CertificateProviderConfig, ClusterConfig
from xdsclient._plane._tls_policy import (
    CertificateStore,
    SanMatcher,
    TlsPolicy,
    dns_name_match,
    tls_policy,
)
from xdsclient.httpx._connections import HttpConnections
from xdsclient.httpx._tls import (
    TlsContexts,
    check_peer,
    cluster_security,
    http_check,
    peer_sans,
)
from xdsclient.lb import ConnectivityState
from xdsclient.resources import CLUSTER
from xdsclient.testing import FakeClock, HttpBackend, http_backends

from .tls_certs import Authority, Issued, authority, dns, email, ip, uri

pytestmark = pytest.mark.timeout(20)

SPIFFE = "spiffe://td.test/ns/shop/sa/reviews"
ROOTS = TlsPolicy(ca_instance="roots")


@pytest.fixture
def ca(tmp_path: Path) -> Authority:
    return authority(tmp_path)


@pytest.fixture
def server(ca: Authority, tmp_path: Path) -> Issued:
    """The backends' certificate: DNS (one a wildcard), a SPIFFE URI, an IP and an email."""
    sans = [
        dns("backend.svc.test"),
        dns("*.wild.test"),
        uri(SPIFFE),
        ip("127.0.0.1"),
        email("ops@svc.test"),
    ]
    return ca.issue(tmp_path, "server", sans)


@pytest.fixture
def client_identity(ca: Authority, tmp_path: Path) -> Issued:
    return ca.issue(tmp_path, "client", [uri("spiffe://td.test/ns/shop/sa/web")])


@pytest.fixture
async def backend(server: Issued) -> AsyncIterator[HttpBackend]:
    async with http_backends(1, certfile=server.cert, keyfile=server.key) as (one,):
        yield one


def contexts(
    ca: Path, identity: Issued | None = None, clock: Any = time.monotonic, refresh: float = 600
) -> TlsContexts:
    providers = {
        "roots": CertificateProviderConfig(ca_certificate_file=str(ca), refresh_interval=refresh)
    }
    if identity is not None:
        providers["identity"] = CertificateProviderConfig(
            certificate_file=str(identity.cert), private_key_file=str(identity.key)
        )
    return TlsContexts(CertificateStore(providers), clock=clock)


@pytest.fixture
async def made() -> AsyncIterator[list[HttpConnections]]:
    """Connections a test makes, closed at its end."""
    everything: list[HttpConnections] = []
    try:
        yield everything
    finally:
        for connections in everything:
            await connections.close()


def connections_for(made: list[HttpConnections], tls: TlsContexts, **kw: Any) -> HttpConnections:
    states: list[ConnectivityState] = []
    connections = HttpConnections(lambda key, state: states.append(state), tls=tls, **kw)
    connections.states = states  # type: ignore[attr-defined]
    made.append(connections)
    return connections


async def get(
    connections: HttpConnections, backend: HttpBackend, policy: TlsPolicy | None
) -> httpx.Response:
    connections.hold_only([backend.address])
    connection = connections.connect(backend.address, policy)
    response = await connection.send(httpx.Request("GET", "https://reviews.svc.test/x"), 5)
    await response.aread()
    return response


def san(**fields: Any) -> Any:
    return string_pb2.StringMatcher(**fields)


# --- matchers, by Envoy's rules ---


@pytest.mark.parametrize(
    ("name", "pattern", "matches"),
    [
        ("a.example.com", "a.example.com", True),
        ("A.Example.com", "a.example.COM", True),
        ("foo.example.com", "*.example.com", True),
        ("example.com", "*.example.com", False),
        ("a.b.example.com", "*.example.com", False),
        ("foobar.example.com", "foo*.example.com", True),
        ("foo.example.com", "foo*.example.com", True),
        ("fo.example.com", "foo*.example.com", False),
        ("bar.example.com", "f*o.example.com", False),
        ("xn--a.example.com", "xn--*.example.com", False),
        ("a.b.example.com", "a.*.example.com", False),
        ("localhost", "*", False),
    ],
)
def test_an_exact_dns_matcher_follows_envoys_dns_name_rules(
    name: str, pattern: str, matches: bool
) -> None:
    """Equal ignoring case, or a wildcard in the certificate's left-most label standing for
    part of one label (never for a dot, never in an A-label)."""
    assert dns_name_match(name, pattern) is matches


@pytest.mark.parametrize(
    ("matcher", "san_type", "value", "matches"),
    [
        (SanMatcher(kind="exact", value=SPIFFE), "URI", SPIFFE, True),
        (SanMatcher(kind="exact", value=SPIFFE.upper()), "URI", SPIFFE, False),
        (SanMatcher(kind="exact", value=SPIFFE.upper(), ignore_case=True), "URI", SPIFFE, True),
        (SanMatcher(kind="prefix", value="spiffe://td.test/"), "URI", SPIFFE, True),
        (SanMatcher(kind="prefix", value="SPIFFE://", ignore_case=True), "URI", SPIFFE, True),
        (SanMatcher(kind="suffix", value="/sa/reviews"), "URI", SPIFFE, True),
        (SanMatcher(kind="suffix", value="/sa/web"), "URI", SPIFFE, False),
        (SanMatcher(kind="contains", value="/ns/shop/"), "URI", SPIFFE, True),
        (
            SanMatcher(kind="safe_regex", value=r"spiffe://td\.test/ns/[^/]+/sa/reviews"),
            "URI",
            SPIFFE,
            True,
        ),
        (SanMatcher(kind="safe_regex", value=r"td\.test"), "URI", SPIFFE, False),  # full match
        (SanMatcher(kind="exact", value="10.0.0.1"), "IP_ADDRESS", "10.0.0.1", True),
        (SanMatcher(kind="exact", value="ops@svc.test"), "EMAIL", "ops@svc.test", True),
        (SanMatcher(kind="exact", value="x.wild.test"), "DNS", "*.wild.test", True),
        (SanMatcher(kind="exact", value="x", san_type="DNS"), "URI", "x", False),
        (SanMatcher(kind="exact", value="x", san_type="URI"), "URI", "x", True),
        (SanMatcher(kind="exact", value="x"), "OTHER_NAME", "x", False),
    ],
)
def test_each_matcher_kind_matches_as_envoys_string_matcher(
    matcher: SanMatcher, san_type: str, value: str, matches: bool
) -> None:
    """exact, prefix, suffix, contains (with ignore_case) and safe_regex (RE2, whole value);
    a typed matcher sees its SAN type only, an untyped one DNS, URI, email and IP SANs."""
    assert matcher.matches(san_type, value) is matches


def test_typed_matchers_replace_the_untyped_ones() -> None:
    """With ``match_typed_subject_alt_names`` set, ``match_subject_alt_names`` is ignored."""
    untyped = (SanMatcher(kind="exact", value="a"),)
    typed = (SanMatcher(kind="exact", value="b", san_type="DNS"),)
    assert TlsPolicy(san_matchers=untyped).matchers() == untyped
    assert TlsPolicy(san_matchers=untyped, typed_san_matchers=typed).matchers() == typed


def test_peer_sans_are_read_with_envoys_type_names_and_canonical_ip_text() -> None:
    """Python's ``getpeercert`` names become Envoy's SAN types; an IPv6 SAN is compared in
    its compressed form, whatever case and zeros Python prints."""
    certificate = {
        "subjectAltName": (
            ("DNS", "a.test"),
            ("URI", SPIFFE),
            ("email", "ops@svc.test"),
            ("IP Address", "2001:DB8:0:0:0:0:0:1\n"),
            ("DirName", ((("commonName", "x"),),)),
        )
    }
    assert peer_sans(certificate) == (
        ("DNS", "a.test"),
        ("URI", SPIFFE),
        ("EMAIL", "ops@svc.test"),
        ("IP_ADDRESS", "2001:db8::1"),
    )


def test_what_python_cannot_check_is_refused_by_the_http_check() -> None:
    """An otherName matcher, an invalid RE2 pattern and a matcher without a pattern make the
    cluster's TLS invalid for HTTP, naming the matcher; the rest passes."""
    other = SanMatcher(kind="exact", value="x", san_type="OTHER_NAME", oid="1.2.3")
    assert "otherName" in (http_check(TlsPolicy(typed_san_matchers=(other,))) or "")
    bad = SanMatcher(kind="safe_regex", value="(")
    assert "not a valid RE2 pattern" in (http_check(TlsPolicy(san_matchers=(bad,))) or "")
    assert "without a pattern" in (
        http_check(TlsPolicy(san_matchers=(SanMatcher(kind="", value=""),))) or ""
    )
    every = tuple(SanMatcher(kind=k, value="a") for k in ("exact", "prefix", "suffix", "contains"))
    assert http_check(TlsPolicy(san_matchers=every)) is None


# --- the policy read from a cluster ---


def _cluster(context: Any, **edit: Any) -> Any:
    message = cluster("c")
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    for key, value in edit.items():
        message.typed_extension_protocol_options[key].Pack(value)
    _, view = CLUSTER.decode(message.SerializeToString())
    return view


def test_a_clusters_context_is_read_with_typed_matchers_sni_alpn_and_versions() -> None:
    """The typed and untyped matchers (a regex's pattern, the SAN type and OID), ``sni``,
    ALPN, the TLS versions and ``auto_host_sni`` come from the ``UpstreamTlsContext``."""
    context = tls_pb2.UpstreamTlsContext(sni="reviews.svc.test", auto_host_sni=True)
    common = context.common_tls_context
    validation = common.validation_context
    validation.ca_certificate_provider_instance.instance_name = "roots"
    validation.match_subject_alt_names.append(san(prefix="spiffe://", ignore_case=True))
    validation.match_typed_subject_alt_names.append(
        common_pb2.SubjectAltNameMatcher(
            san_type=common_pb2.SubjectAltNameMatcher.URI,
            matcher=san(safe_regex=regex_pb2.RegexMatcher(regex="spiffe://.*")),
        )
    )
    common.tls_certificate_provider_instance.instance_name = "identity"
    common.alpn_protocols.extend(["h2"])
    common.tls_params.tls_minimum_protocol_version = common_pb2.TlsParameters.TLSv1_3
    policy = tls_policy(_cluster(context))
    assert policy == TlsPolicy(
        ca_instance="roots",
        identity_instance="identity",
        san_matchers=(SanMatcher(kind="prefix", value="spiffe://", ignore_case=True),),
        typed_san_matchers=(SanMatcher(kind="safe_regex", value="spiffe://.*", san_type="URI"),),
        sni="reviews.svc.test",
        auto_sni=True,
        alpn_protocols=("h2",),
        min_version="TLSv1_3",
    )


def test_auto_sni_from_the_http_protocol_options_names_the_requests_host() -> None:
    """``auto_sni`` and ``auto_san_validation`` of the cluster's HTTP protocol options make
    the request's host the SNI and the name to verify (`TlsPolicy.for_host`)."""
    context = tls_pb2.UpstreamTlsContext()
    context.common_tls_context.validation_context.ca_certificate_provider_instance.instance_name = (
        "roots"
    )
    options = http_protocol_options_pb2.HttpProtocolOptions()
    options.upstream_http_protocol_options.auto_sni = True
    options.upstream_http_protocol_options.auto_san_validation = True
    options.explicit_http_config.http_protocol_options.SetInParent()
    policy = tls_policy(
        _cluster(context, **{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": options})
    )
    assert policy is not None
    assert policy.auto_sni
    assert policy.auto_san_validation
    host = policy.for_host("reviews.svc.test")
    assert (host.sni, host.verify_host) == ("reviews.svc.test", "reviews.svc.test")
    assert ROOTS.for_host("reviews.svc.test") is ROOTS


def test_a_cluster_whose_matchers_http_cannot_check_is_invalid_and_its_endpoints_blocked() -> None:
    """The HTTP front end's `ClusterSecurity` refuses a cluster with an otherName matcher
    (naming it) and keeps its endpoints from plaintext; a cluster with any other matcher, which
    grpcio would refuse, is valid for HTTP."""
    from tests.builders import endpoints
    from xdsclient.resources import ENDPOINT

    def config(matcher: Any) -> ClusterConfig:
        context = tls_pb2.UpstreamTlsContext()
        validation = context.common_tls_context.validation_context
        validation.ca_certificate_provider_instance.instance_name = "roots"
        validation.match_typed_subject_alt_names.append(matcher)
        _, assignment = ENDPOINT.decode(endpoints("c").SerializeToString())
        return ClusterConfig(name="c", cluster=_cluster(context), endpoints=assignment)

    security = cluster_security({"roots": CertificateProviderConfig(ca_certificate_file="/ca")})
    other = common_pb2.SubjectAltNameMatcher(
        san_type=common_pb2.SubjectAltNameMatcher.OTHER_NAME, oid="1.2.3", matcher=san(exact="x")
    )
    assert security.update({"c": config(other)}) == []
    assert "otherName" in (security.invalid("c") or "")
    prefix = common_pb2.SubjectAltNameMatcher(
        san_type=common_pb2.SubjectAltNameMatcher.URI, matcher=san(prefix="spiffe://")
    )
    (slot,) = security.update({"c": config(prefix)})
    assert security.invalid("c") is None
    assert slot[1] == security.policy_of_cluster("c")


# --- real handshakes ---


async def test_a_tls_backend_is_reached_with_the_ca_providers_roots_and_no_sni_unless_asked(
    ca: Authority, backend: HttpBackend, made: list[HttpConnections]
) -> None:
    """A backend the provider's CA signed answers over TLS; no SNI is sent without ``sni``
    (not the URL's host, not the address), and the policy's ``sni`` when set."""
    connections = connections_for(made, contexts(ca.cert))
    assert (await get(connections, backend, ROOTS)).json()["backend"] == "b0"
    named = TlsPolicy(ca_instance="roots", sni="reviews.svc.test")
    assert (await get(connections, backend, named)).status_code == 200
    assert backend.server_names == [None, "reviews.svc.test"]


async def test_auto_sni_sends_the_requests_host_and_auto_san_validation_checks_it(
    ca: Authority, backend: HttpBackend, made: list[HttpConnections]
) -> None:
    """Under ``auto_sni`` the host given to `for_host` is the SNI; under
    ``auto_san_validation`` a host the certificate names passes and another is refused."""
    auto = TlsPolicy(ca_instance="roots", auto_sni=True, auto_san_validation=True)
    connections = connections_for(made, contexts(ca.cert))
    assert (await get(connections, backend, auto.for_host("api.wild.test"))).status_code == 200
    assert backend.server_names == ["api.wild.test"]
    with pytest.raises(httpx.ConnectError, match="auto_san_validation"):
        await get(connections, backend, auto.for_host("elsewhere.test"))
    assert backend.total == 1


async def test_http2_is_negotiated_by_alpn_when_asked(
    ca: Authority, backend: HttpBackend, made: list[HttpConnections]
) -> None:
    """With HTTP/2 on, ALPN picks h2 and the request goes in HTTP/2; off, HTTP/1.1."""
    h2 = connections_for(made, contexts(ca.cert), http2=True)
    assert (await get(h2, backend, ROOTS)).http_version == "HTTP/2"
    h1 = connections_for(made, contexts(ca.cert))
    assert (await get(h1, backend, ROOTS)).http_version == "HTTP/1.1"
    assert [seen.http_version for seen in backend.requests] == ["2", "1.1"]


async def test_an_mtls_backend_takes_the_identity_providers_certificate(
    ca: Authority, server: Issued, client_identity: Issued, made: list[HttpConnections]
) -> None:
    """A backend requiring a client certificate answers a policy with an identity instance,
    and never sees a request from one without."""
    async with http_backends(1, certfile=server.cert, keyfile=server.key, client_ca=ca.cert) as (
        strict,
    ):
        mtls = TlsPolicy(ca_instance="roots", identity_instance="identity")
        with_identity = connections_for(made, contexts(ca.cert, client_identity))
        assert (await get(with_identity, strict, mtls)).status_code == 200
        without = connections_for(made, contexts(ca.cert))
        with pytest.raises(httpx.TransportError):
            await get(without, strict, ROOTS)
        assert strict.total == 1


async def test_a_server_certificate_another_ca_signed_is_a_connect_failure(
    tmp_path: Path, backend: HttpBackend, made: list[HttpConnections]
) -> None:
    """Roots of another CA refuse the backend at the handshake: ConnectError, the endpoint in
    TRANSIENT_FAILURE, no request received."""
    other = tmp_path / "other"
    other.mkdir()
    connections = connections_for(made, contexts(authority(other).cert))
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        await get(connections, backend, ROOTS)
    assert connections.states[-1] is ConnectivityState.TRANSIENT_FAILURE  # type: ignore[attr-defined]
    assert backend.total == 0


async def test_a_wrong_san_is_refused_naming_the_matchers_and_the_sans_seen(
    ca: Authority, backend: HttpBackend, made: list[HttpConnections]
) -> None:
    """A certificate none of whose SANs the matchers accept fails the connect after the
    handshake, with a message naming the matchers and every SAN seen; the backend gets no
    request and the endpoint is in TRANSIENT_FAILURE."""
    policy = TlsPolicy(
        ca_instance="roots",
        san_matchers=(SanMatcher(kind="exact", value="other.svc.test"),),
        typed_san_matchers=(
            SanMatcher(kind="prefix", value="spiffe://td.test/ns/pay/", san_type="URI"),
        ),
    )
    connections = connections_for(made, contexts(ca.cert))
    with pytest.raises(httpx.ConnectError) as caught:
        await get(connections, backend, policy)
    assert str(caught.value) == (
        "TLS: the server's certificate matches none of the subject alt name matchers "
        "[URI prefix 'spiffe://td.test/ns/pay/']; its SANs: DNS:backend.svc.test, "
        f"DNS:*.wild.test, URI:{SPIFFE}, IP_ADDRESS:127.0.0.1, EMAIL:ops@svc.test"
    )
    assert backend.total == 0
    assert connections.states[-1] is ConnectivityState.TRANSIENT_FAILURE  # type: ignore[attr-defined]


async def test_every_matcher_kind_is_checked_against_the_real_certificate(
    ca: Authority, backend: HttpBackend, made: list[HttpConnections]
) -> None:
    """Each matcher kind, typed and untyped, with and without ignore_case, against the
    backend's real certificate: those naming one of its SANs connect, the others are
    refused."""
    cases = {
        SanMatcher(kind="exact", value="backend.svc.test"): True,
        SanMatcher(kind="exact", value="BACKEND.svc.test"): True,  # DNS names ignore case
        SanMatcher(kind="exact", value="x.wild.test"): True,  # the certificate's wildcard
        SanMatcher(kind="exact", value="wild.test"): False,
        SanMatcher(kind="exact", value=SPIFFE): True,
        SanMatcher(kind="exact", value="127.0.0.1"): True,
        SanMatcher(kind="exact", value="127.0.0.2"): False,
        SanMatcher(kind="exact", value="ops@svc.test"): True,
        SanMatcher(kind="prefix", value="spiffe://td.test/ns/shop/"): True,
        SanMatcher(kind="prefix", value="SPIFFE://TD.test/", ignore_case=True): True,
        SanMatcher(kind="prefix", value="SPIFFE://TD.test/"): False,
        SanMatcher(kind="suffix", value=".svc.test"): True,
        SanMatcher(kind="suffix", value=".other.test"): False,
        SanMatcher(kind="contains", value="/sa/reviews"): True,
        SanMatcher(kind="contains", value="/SA/", ignore_case=True): True,
        SanMatcher(kind="safe_regex", value=r"spiffe://td\.test/ns/\w+/sa/reviews"): True,
        SanMatcher(kind="safe_regex", value=r"svc\.test"): False,
        SanMatcher(kind="exact", value=SPIFFE, san_type="URI"): True,
        SanMatcher(kind="exact", value=SPIFFE, san_type="DNS"): False,
        SanMatcher(kind="exact", value="127.0.0.1", san_type="IP_ADDRESS"): True,
        SanMatcher(kind="suffix", value="@svc.test", san_type="EMAIL"): True,
        SanMatcher(kind="exact", value="backend.svc.test", san_type="URI"): False,
    }
    connections = connections_for(made, contexts(ca.cert))
    outcomes = {}
    for matcher in cases:
        if matcher.san_type:
            policy = TlsPolicy(ca_instance="roots", typed_san_matchers=(matcher,))
        else:
            policy = TlsPolicy(ca_instance="roots", san_matchers=(matcher,))
        try:
            await get(connections, backend, policy)
        except httpx.ConnectError:
            outcomes[matcher] = False
        else:
            outcomes[matcher] = True
    assert outcomes == cases
    assert backend.total == sum(cases.values())


async def test_rotated_roots_reach_the_next_connect_once_the_refresh_interval_has_passed(
    ca: Authority, tmp_path: Path, made: list[HttpConnections]
) -> None:
    """The CA file rotated to a new CA (whose server now answers) is not read before the
    refresh interval has passed on the clock, so the connect is refused; once it has, the
    same pool's next connect uses a new context with the new roots and succeeds."""
    clock = FakeClock()
    other = tmp_path / "other"
    other.mkdir()
    new_ca = authority(other)
    new_server = new_ca.issue(other, "server", [ip("127.0.0.1")])
    tls = contexts(ca.cert, clock=clock.time, refresh=30)
    first = tls.context(ROOTS)
    assert tls.context(ROOTS) is first
    async with http_backends(1, certfile=new_server.cert, keyfile=new_server.key) as (new,):
        ca.cert.write_bytes(new_ca.cert.read_bytes())
        connections = connections_for(made, tls, clock=clock)
        clock.advance(29)
        with pytest.raises(httpx.ConnectError):
            await get(connections, new, ROOTS)
        clock.advance(1)
        assert tls.context(ROOTS) is not first
        assert (await get(connections, new, ROOTS)).status_code == 200


def test_no_matcher_accepts_any_certificate_the_roots_sign() -> None:
    """Without matchers (and without ``auto_san_validation``) nothing is checked past the
    chain, as in Envoy: even a certificate without SANs passes."""

    class Peer:
        def getpeercert(self) -> dict[str, Any]:
            return {}

    check_peer(ROOTS, Peer())
    with pytest.raises(Exception, match="its SANs: none"):
        check_peer(TlsPolicy(san_matchers=(SanMatcher(kind="exact", value="a"),)), Peer())
