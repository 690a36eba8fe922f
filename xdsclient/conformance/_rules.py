"""The conformance rules: id, level, source and what each asks of a management server.

Why a table: a finding must say which rule failed, how strongly the spec asks for it (MUST /
SHOULD, from its wording) and where it says so, so that a control-plane team can judge it
without reading our code. Sources are sections of the xDS protocol document
(shared/spec/xds-protocol.txt) or gRFCs.
"""

from __future__ import annotations

import enum

import attrs

__all__ = ["RULES", "Level", "Rule", "RuleId"]


class RuleId(enum.StrEnum):
    """Every rule's id. Findings name rules by member, so a misspelt id fails type checking
    (and `RuleId("...")` raises) instead of leaving a rule silently N/A."""

    RESPONSE_TYPE_URL = "response-type-url"
    NONCE_PRESENT = "nonce-present"
    NONCE_UNIQUE = "nonce-unique"
    ANY_TYPE_CONSISTENT = "any-type-consistent"
    SOTW_VERSION_PRESENT = "sotw-version-present"
    NO_DUPLICATE_NAMES = "no-duplicate-names"
    RESOURCES_VALID = "resources-valid"
    REFERENCES_RESOLVE = "references-resolve"
    RESPONSE_SIZE = "response-size"
    INITIAL_REQUEST_ANSWERED = "initial-request-answered"
    REQUESTED_RESOURCES_SUPPLIED = "requested-resources-supplied"
    ONLY_REQUESTED_RESOURCES = "only-requested-resources"
    SOTW_FULL_STATE = "sotw-full-state"
    WILDCARD_ANSWERED = "wildcard-answered"
    NO_RESPONSE_TO_ACK = "no-response-to-ack"
    NO_RESEND_AFTER_NACK = "no-resend-after-nack"
    NACK_KEEPS_STREAM = "nack-keeps-stream"
    NEW_NAME_RESENT = "new-name-resent"
    RESUBSCRIBE_ANSWERED = "resubscribe-answered"
    STALE_NONCE_IGNORED = "stale-nonce-ignored"
    NODE_FIRST_REQUEST_ONLY = "node-first-request-only"
    UNKNOWN_TYPE_SURVIVES = "unknown-type-survives"
    DELTA_RESOURCE_NAME = "delta-resource-name"
    DELTA_RESOURCE_VERSION = "delta-resource-version"
    DELTA_DOES_NOT_EXIST = "delta-does-not-exist"
    DELTA_INITIAL_VERSIONS = "delta-initial-versions"
    DELTA_PHANTOM_UNSUBSCRIBE = "delta-phantom-unsubscribe"
    DELTA_RESUBSCRIBE_RESENT = "delta-resubscribe-resent"
    DELTA_EXPLICIT_WILDCARD = "delta-explicit-wildcard"
    ODCDS_UNKNOWN_CLUSTER = "odcds-unknown-cluster"
    ODCDS_KNOWN_CLUSTER = "odcds-known-cluster"
    VHDS_UNKNOWN_HOST = "vhds-unknown-host"
    VHDS_RESENT_AFTER_ROUTE_CHANGE = "vhds-resent-after-route-change"
    TTL_REFRESHED = "ttl-refreshed"
    LRS_INTERVAL_SET = "lrs-interval-set"
    LRS_ACCEPTS_REPORTS = "lrs-accepts-reports"


class Level(enum.Enum):
    """How strongly the spec asks for a rule; only a failing MUST makes a report not ok."""

    MUST = "MUST"
    SHOULD = "SHOULD"


@attrs.frozen
class Rule:
    """One rule: its id, how strongly the spec asks for it, where it says so, and what it asks."""

    id: RuleId = attrs.field(converter=RuleId)
    level: Level
    source: str
    text: str


_SPEC = "xds-protocol"
_M, _S = Level.MUST, Level.SHOULD

#: Every rule the checker reports, by id, in the order reports list them.
RULES: dict[RuleId, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            RuleId.RESPONSE_TYPE_URL,
            _M,
            f"{_SPEC}: DiscoveryResponse, type_url",
            "a response carries the type URL of the request it answers",
        ),
        Rule(
            RuleId.NONCE_PRESENT,
            _M,
            f"{_SPEC}: ACK/NACK and versioning; incremental nonce",
            "every response carries a nonce",
        ),
        Rule(
            RuleId.NONCE_UNIQUE,
            _S,
            f"{_SPEC}: When to send an update (stale nonces)",
            "nonces are not reused on a stream, or stale requests cannot be told apart",
        ),
        Rule(
            RuleId.ANY_TYPE_CONSISTENT,
            _M,
            f"{_SPEC}: Resource types",
            "every resource is packed with the response's type URL (or in a Resource wrapper)",
        ),
        Rule(
            RuleId.SOTW_VERSION_PRESENT,
            _S,
            f"{_SPEC}: ACK/NACK and versioning",
            "SotW responses carry a version_info the client can ACK",
        ),
        Rule(
            RuleId.NO_DUPLICATE_NAMES,
            _M,
            f"{_SPEC}: Duplicate Resource Names",
            "a response never names the same resource twice",
        ),
        Rule(
            RuleId.RESOURCES_VALID,
            _M,
            "gRFC A27 and the gRFCs it builds on",
            "every served resource passes gRPC's client validation (a gRPC client would NACK it)",
        ),
        Rule(
            RuleId.REFERENCES_RESOLVE,
            _S,
            "gRFC A27: the LDS -> RDS -> CDS -> EDS walk",
            "every route configuration, cluster and endpoint assignment referenced is served",
        ),
        Rule(
            RuleId.RESPONSE_SIZE,
            _S,
            "gRPC default max receive message size (4 MiB)",
            "responses fit in gRPC's default 4 MiB receive limit",
        ),
        Rule(
            RuleId.INITIAL_REQUEST_ANSWERED,
            _M,
            f"{_SPEC}: How the client specifies what resources",
            "the first request for a type that has resources is answered",
        ),
        Rule(
            RuleId.REQUESTED_RESOURCES_SUPPLIED,
            _M,
            f"{_SPEC}: How the client specifies (must supply)",
            "the management server must supply the requested resources if they exist",
        ),
        Rule(
            RuleId.ONLY_REQUESTED_RESOURCES,
            _S,
            f"{_SPEC}: How the client specifies what resources",
            "for non-wildcard subscriptions only requested resources are sent",
        ),
        Rule(
            RuleId.SOTW_FULL_STATE,
            _M,
            f"{_SPEC}: Grouping Resources into Responses",
            "SotW LDS/CDS responses carry every subscribed resource, changed or not",
        ),
        Rule(
            RuleId.WILDCARD_ANSWERED,
            _S,
            f"{_SPEC}: How the client specifies (wildcard mode)",
            "a wildcard subscription to LDS/CDS is answered with the resources for the node",
        ),
        Rule(
            RuleId.NO_RESPONSE_TO_ACK,
            _S,
            f"{_SPEC}: When to send an update",
            "a plain ACK gets no response while nothing changed (no echo loop)",
        ),
        Rule(
            RuleId.NO_RESEND_AFTER_NACK,
            _S,
            f"{_SPEC}: When to send an update",
            "a NACKed version is not sent again at once (no hot loop)",
        ),
        Rule(
            RuleId.NACK_KEEPS_STREAM,
            _M,
            f"{_SPEC}: ACK/NACK and versioning",
            "a NACK does not end the stream",
        ),
        Rule(
            RuleId.NEW_NAME_RESENT,
            _M,
            f"{_SPEC}: How the client specifies (newly requested)",
            "newly requested resources are sent even if sent before and unchanged",
        ),
        Rule(
            RuleId.RESUBSCRIBE_ANSWERED,
            _M,
            f"{_SPEC}: Unsubscribing From Resources",
            "a resource unsubscribed and subscribed again is sent again",
        ),
        Rule(
            RuleId.STALE_NONCE_IGNORED,
            _S,
            f"{_SPEC}: Resource updates (stale nonces)",
            "no response is sent for a request carrying a stale nonce",
        ),
        Rule(
            RuleId.NODE_FIRST_REQUEST_ONLY,
            _M,
            f"{_SPEC}: Streams (node identifier)",
            "requests after the first on a stream are served without a node",
        ),
        Rule(
            RuleId.UNKNOWN_TYPE_SURVIVES,
            _S,
            "gRFC A27 (ADS carries every type)",
            "a request for an unknown type URL does not end an ADS stream",
        ),
        Rule(
            RuleId.DELTA_RESOURCE_NAME,
            _M,
            f"{_SPEC}: Incremental xDS, Resource names",
            "every Delta resource has a name",
        ),
        Rule(
            RuleId.DELTA_RESOURCE_VERSION,
            _M,
            f"{_SPEC}: Incremental xDS",
            "every Delta resource with a body has a version",
        ),
        Rule(
            RuleId.DELTA_DOES_NOT_EXIST,
            _S,
            f"{_SPEC}: Knowing When a Requested Resource Does Not Exist",
            "a subscribed resource that does not exist is sent as a Resource without a body",
        ),
        Rule(
            RuleId.DELTA_INITIAL_VERSIONS,
            _S,
            f"{_SPEC}: Incremental reconnect",
            "resources whose initial_resource_versions are current are not resent",
        ),
        Rule(
            RuleId.DELTA_PHANTOM_UNSUBSCRIBE,
            _M,
            f"{_SPEC}: Unsubscribing from Resources (Delta)",
            "unsubscribing a name never subscribed is processed cleanly",
        ),
        Rule(
            RuleId.DELTA_RESUBSCRIBE_RESENT,
            _M,
            f"{_SPEC}: Subscribing to Resources (Delta)",
            "subscribing again to a resource the client has is answered with it",
        ),
        Rule(
            RuleId.DELTA_EXPLICIT_WILDCARD,
            _M,
            f"{_SPEC}: How the client specifies (wildcard '*')",
            "an explicit '*' subscription gets the same resources as the implicit wildcard",
        ),
        Rule(
            RuleId.ODCDS_UNKNOWN_CLUSTER,
            _S,
            f"{_SPEC}: Incremental xDS (on demand); Envoy on-demand CDS",
            "a cluster subscribed on demand that the server does not have is named in"
            " removed_resources",
        ),
        Rule(
            RuleId.ODCDS_KNOWN_CLUSTER,
            _S,
            f"{_SPEC}: Incremental xDS (on demand); Envoy on-demand CDS",
            "a cluster the server has, subscribed on demand on a stream that already answered"
            " the type, is sent at once with its body",
        ),
        Rule(
            RuleId.VHDS_UNKNOWN_HOST,
            _S,
            "Envoy VHDS: Subscribing to Resources",
            "a host no virtual host matches is answered by a Resource named and aliased by the"
            " host, with no body",
        ),
        Rule(
            RuleId.VHDS_RESENT_AFTER_ROUTE_CHANGE,
            _S,
            "Envoy VHDS: Subscribing to Resources",
            "after the route configuration changes, the virtual hosts the client holds are sent"
            " again",
        ),
        Rule(
            RuleId.TTL_REFRESHED,
            _S,
            f"{_SPEC}: TTL",
            "a resource served with a TTL is refreshed (heartbeat or update) before it expires",
        ),
        Rule(
            RuleId.LRS_INTERVAL_SET,
            _M,
            "gRFC A27 (load reporting); lrs.proto LoadStatsResponse",
            "an LRS stream is answered with a positive load_reporting_interval",
        ),
        Rule(
            RuleId.LRS_ACCEPTS_REPORTS,
            _M,
            "gRFC A27 (load reporting); lrs.proto LoadStatsRequest",
            "a load report on an LRS stream does not end the stream",
        ),
    )
}

if set(RULES) != set(RuleId):  # pragma: no cover - a rule added to one table but not the other
    raise RuntimeError(f"rules without an entry in RULES: {sorted(set(RuleId) - set(RULES))}")
