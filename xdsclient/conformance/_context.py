"""What a variant's checks share: the channel and node, the findings so far, what discovery
found, and the rules every response is held to (nonce, type URLs, duplicates, size, validity).

Why apart from the scenarios: discovery and every scenario drive streams through the same
`Context`, and a finding must name its rule by `RuleId`, checked when it is made, so a misspelt
rule fails loudly instead of leaving the rule N/A. A stream that ends where a script did not
expect it fails the rule the script was checking then (`Probe.step`), not some other rule.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs

from .._errors import ResourceDecodeError
from .._protocol._messages import Resource
from ..resources import BUILTIN_TYPES as _BUILTIN
from ..resources import CLUSTER, LISTENER
from ._probe import Probe, StreamEnded, brief
from ._rules import RuleId

__all__ = [
    "BUILTIN_TYPES",
    "FULL_STATE",
    "MAX_RESPONSES",
    "Context",
    "Finding",
    "resources_of",
    "ttls_of",
]

BUILTIN_TYPES = {rtype.type_url: rtype for rtype in _BUILTIN}
_WRAPPER = "type.googleapis.com/envoy.service.discovery.v3.Resource"
_MAX_RECEIVE = 4 * 1024 * 1024
#: SotW responses of these types carry every subscribed resource
FULL_STATE = (LISTENER.type_url, CLUSTER.type_url)
#: responses read at most while waiting for something (a server in an echo loop never stops)
MAX_RESPONSES = 16


@attrs.frozen
class Finding:
    """One evaluation of a rule: passed (True), failed (False) or not applicable (None)."""

    rule: RuleId = attrs.field(converter=RuleId)
    variant: str
    passed: bool | None
    detail: str = ""
    evidence: str = ""


@attrs.define
class Context:
    """What a variant's scenarios share: the channel, the variant, the findings so far."""

    channel: Any
    variant: str
    ads: bool
    delta: bool
    node: Any
    quiet: float
    timeout: float
    listeners: tuple[str, ...] = ()
    resources: tuple[tuple[str, str], ...] = ()
    #: the server ignores requests without a node: send it on every request, so that rules
    #: other than ``node-first-request-only`` are still checked on their own
    node_always: bool = False
    findings: list[Finding] = attrs.Factory(list)
    #: type URL -> name -> (version, serialized resource), as discovered
    served: dict[str, dict[str, tuple[str, bytes]]] = attrs.Factory(dict)
    #: (type URL, name) -> the TTL (seconds) a resource was served with
    ttls: dict[tuple[str, str], float] = attrs.Factory(dict)

    def note(self, rule: RuleId, passed: bool | None, detail: str = "", evidence: str = "") -> None:
        self.findings.append(Finding(rule, self.variant, passed, detail, evidence))

    @contextlib.asynccontextmanager
    async def probe(
        self, type_url: str, *, node_every_request: bool | None = None
    ) -> AsyncIterator[Probe]:
        """A fresh stream for ``type_url``, closed on exit. If the stream ends inside, the rule
        the script was checking (`Probe.step`) fails with the status as evidence, and the block
        is left."""
        probe = Probe(
            self.channel,
            ads=self.ads,
            delta=self.delta,
            type_url=type_url,
            node=self.node,
            node_every_request=self.node_always
            if node_every_request is None
            else node_every_request,
        )
        try:
            yield probe
        except StreamEnded as exc:
            if probe.step is not None:
                self.note(probe.step, False, f"stream ended: {exc}", probe.evidence())
        finally:
            await probe.close()

    # ------------------------------------------------------------------ requests

    async def subscribe(
        self, probe: Probe, type_url: str, names: Iterable[str], **more: Any
    ) -> Any:
        """Subscribe (SotW: the full list of names; Delta: these names)."""
        if self.delta:
            return await probe.send(type_url=type_url, resource_names_subscribe=list(names), **more)
        more.setdefault("response_nonce", probe.nonces.get(type_url, ""))
        more.setdefault("version_info", probe.acked.get(type_url, ""))
        return await probe.send(type_url=type_url, resource_names=list(names), **more)

    async def receive(self, probe: Probe, type_url: str, timeout: float | None = None) -> Any:
        """The next response (checked against every per-response rule), None on silence."""
        response = await probe.recv(self.timeout if timeout is None else timeout)
        if response is not None:
            self.inspect(probe, response, type_url)
        return response

    async def collect(
        self, probe: Probe, type_url: str, wanted: set[str] | None
    ) -> dict[str, tuple[str, bytes]]:
        """Responses (each ACKed) until every ``wanted`` name came (any response, for a
        wildcard) or the server goes quiet; the resources received."""
        got: dict[str, tuple[str, bytes]] = {}
        timeout = self.timeout
        for _ in range(MAX_RESPONSES):
            response = await self.receive(probe, type_url, timeout)
            if response is None:
                return got
            got.update(resources_of(response))
            names = list(wanted or ()) if not self.delta else []
            await probe.ack(response, **({} if self.delta else {"resource_names": names}))
            if wanted is None or wanted <= set(got):
                return got
            timeout = self.quiet
        return got

    # ------------------------------------------------------------------ per-response rules

    def inspect(self, probe: Probe, response: Any, type_url: str) -> None:
        evidence = f"<- {brief(response)}"
        self.note(
            RuleId.RESPONSE_TYPE_URL,
            response.type_url == type_url,
            f"asked for {type_url}, got {response.type_url!r}",
            evidence,
        )
        self.note(RuleId.NONCE_PRESENT, bool(response.nonce), "no nonce", evidence)
        seen_nonces = [m.nonce for d, _, m in probe.log[:-1] if d == "<-"]
        self.note(
            RuleId.NONCE_UNIQUE,
            response.nonce not in seen_nonces,
            f"nonce {response.nonce!r} reused on the stream",
            evidence,
        )
        self.note(
            RuleId.RESPONSE_SIZE,
            response.ByteSize() <= _MAX_RECEIVE,
            f"{response.ByteSize()} bytes",
            "",
        )
        if not self.delta:
            self.note(
                RuleId.SOTW_VERSION_PRESENT,
                bool(response.version_info),
                "empty version_info",
                evidence,
            )
        names: list[str] = []
        for name, packed_type, body in _entries(response, self.delta):
            if self.delta:
                self.note(
                    RuleId.DELTA_RESOURCE_NAME, bool(name), "a resource without a name", evidence
                )
            if body is None:
                continue
            self.note(
                RuleId.ANY_TYPE_CONSISTENT,
                packed_type == type_url,
                f"{name or '?'} packed as {packed_type!r}",
                evidence,
            )
            if packed_type == type_url:
                name = self._validate(type_url, name, body, evidence) or name
            names.append(name)
        for name, ttl in ttls_of(response, self.delta):
            self.ttls[type_url, name] = ttl
        if self.delta:
            for resource in response.resources:
                if resource.HasField("resource"):
                    self.note(
                        RuleId.DELTA_RESOURCE_VERSION,
                        bool(resource.version),
                        f"{resource.name} has no version",
                        evidence,
                    )
        duplicates = sorted({n for n in names if n and names.count(n) > 1})
        if names:  # a response without resources has nothing to name twice: not a pass
            self.note(
                RuleId.NO_DUPLICATE_NAMES, not duplicates, f"named twice: {duplicates}", evidence
            )

    def _validate(self, type_url: str, name: str, body: bytes, evidence: str) -> str:
        rtype = BUILTIN_TYPES.get(type_url)
        if rtype is None:
            return name
        try:
            decoded, _ = rtype.decode(body)
        except ResourceDecodeError as exc:
            self.note(RuleId.RESOURCES_VALID, False, f"{exc.name or name}: {exc.message}", evidence)
            return exc.name or name
        self.note(RuleId.RESOURCES_VALID, True)
        return str(decoded)


def _entries(response: Any, delta: bool) -> list[tuple[str, str, bytes | None]]:
    """(name, packed type URL, body or None) per resource; SotW names come from decoding."""
    entries: list[tuple[str, str, bytes | None]] = []
    for item in response.resources:
        if delta:
            body = item.resource.value if item.HasField("resource") else None
            entries.append((item.name, item.resource.type_url, body))
        elif item.type_url == _WRAPPER:
            wrapper = Resource.FromString(item.value)
            body = wrapper.resource.value if wrapper.HasField("resource") else None
            entries.append((wrapper.name, wrapper.resource.type_url, body))
        else:
            entries.append(("", item.type_url, item.value))
    return entries


def ttls_of(response: Any, delta: bool) -> list[tuple[str, float]]:
    """(name, TTL seconds) of the resources a response serves with a TTL."""
    found = []
    for item in response.resources:
        if delta:
            resource = item
        elif item.type_url == _WRAPPER:
            resource = Resource.FromString(item.value)
        else:
            continue
        if resource.HasField("ttl") and resource.name:
            found.append((resource.name, resource.ttl.ToNanoseconds() / 1e9))
    return found


def resources_of(response: Any) -> dict[str, tuple[str, bytes]]:
    """name -> (version, body) of the valid-looking resources of a response."""
    out: dict[str, tuple[str, bytes]] = {}
    delta = hasattr(response, "system_version_info")
    rtype = BUILTIN_TYPES.get(response.type_url)
    for name, _, body in _entries(response, delta):
        if body is None:
            continue
        if not name and rtype is not None:
            try:
                name, _ = rtype.decode(body)
            except ResourceDecodeError as exc:
                name = exc.name or ""
        version = response.version_info if not delta else _delta_version(response, name)
        if name:
            out[name] = (version, body)
    return out


def _delta_version(response: Any, name: str) -> str:
    return next((str(r.version) for r in response.resources if r.name == name), "")
