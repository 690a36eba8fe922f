"""Seeded protocol bugs for `ControlPlane`: realistic mistakes a management server makes,
switchable one by one, to prove that `xdsclient check` catches each (the mutation table in
docs/testing-control-planes.md), and to test a client against a misbehaving server."""

from __future__ import annotations

import enum

__all__ = ["SeededBug"]


class SeededBug(enum.Enum):
    """One protocol mistake `ControlPlane(bugs={...})` makes on purpose."""

    NO_NONCE = "responses carry no nonce"
    REUSED_NONCE = "every response on a stream carries the same nonce"
    WRONG_TYPE_URL = "responses name the v2 type URL instead of the requested v3 one"
    V2_ANY_TYPES = "resources are packed with v2 type URLs"
    EMPTY_VERSION = "SotW responses carry no version_info"
    DUPLICATE_RESOURCE = "the first resource of a response is sent twice"
    UNREQUESTED_RESOURCES = "every resource of a type is sent, whatever was requested"
    PARTIAL_STATE = "SotW LDS/CDS responses carry only what changed"
    NO_RESEND_ON_SUBSCRIBE = "a newly requested resource sent before is not sent again"
    ECHO_ON_ACK = "every request, ACKs included, is answered with the resources again"
    RESEND_AFTER_NACK = "a NACKed version is sent again at once"
    ANSWER_STALE = "requests carrying a stale nonce are processed and answered"
    NODE_REQUIRED = "requests without a node are ignored"
    UNKNOWN_TYPE_ABORTS = "a request for an unknown type URL ends the stream"
    PHANTOM_UNSUBSCRIBE_ABORTS = "Delta: unsubscribing a name never subscribed ends the stream"
    IGNORE_INITIAL_VERSIONS = "Delta: initial_resource_versions are ignored on a new stream"
    NO_DELTA_ABSENT = "Delta: nothing is sent for a subscribed name that does not exist"
    DELTA_NO_VERSION = "Delta: resources carry no version"
    LATE_SUBSCRIPTION_WAITS = (
        "Delta: a name subscribed on a stream that already asked for its type is sent only at "
        "the type's next change"
    )
