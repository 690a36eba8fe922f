"""The scenarios the checker runs against a management server, one variant at a time.

Why scenarios, not one rule per connection: most rules need the same setup (discover what the
server serves, subscribe, ACK), so each scenario drives a fresh stream through a short script
and reports on every rule it touches; every response is also checked for the rules that apply
to any response (nonce, type URLs, duplicates, size, validity). Timing rules ("no response to a
plain ACK") wait a bounded quiet window. Discovery uses only what the server serves: wildcard
LDS and CDS (or the listeners and resources given), then the names they reference.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs

from .._errors import ResourceDecodeError
from .._protocol._messages import Resource
from ..resources import BUILTIN_TYPES as _BUILTIN
from ..resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION, ClusterType
from ._probe import Probe, StreamEnded, brief

__all__ = ["Context", "Finding", "run_variant"]

BUILTIN_TYPES = {rtype.type_url: rtype for rtype in _BUILTIN}
_WRAPPER = "type.googleapis.com/envoy.service.discovery.v3.Resource"
_MAX_RECEIVE = 4 * 1024 * 1024
_UNKNOWN_TYPE = "type.googleapis.com/xdsclient.conformance.NoSuchType"
_MISSING = "xdsclient-conformance-does-not-exist"
_FULL_STATE = (LISTENER.type_url, CLUSTER.type_url)
#: responses read at most while waiting for something (a server in an echo loop never stops)
_MAX_RESPONSES = 16


@attrs.frozen
class Finding:
    """One evaluation of a rule: passed (True), failed (False) or not applicable (None)."""

    rule: str
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
    findings: list[Finding] = attrs.Factory(list)
    #: type URL -> name -> (version, serialized resource), as discovered
    served: dict[str, dict[str, tuple[str, bytes]]] = attrs.Factory(dict)
    #: (type URL, name) -> the TTL (seconds) a resource was served with
    ttls: dict[tuple[str, str], float] = attrs.Factory(dict)

    def note(self, rule: str, passed: bool | None, detail: str = "", evidence: str = "") -> None:
        self.findings.append(Finding(rule, self.variant, passed, detail, evidence))

    @contextlib.asynccontextmanager
    async def probe(self, type_url: str) -> AsyncIterator[Probe]:
        probe = Probe(
            self.channel, ads=self.ads, delta=self.delta, type_url=type_url, node=self.node
        )
        try:
            yield probe
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
        for _ in range(_MAX_RESPONSES):
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
            "response-type-url",
            response.type_url == type_url,
            f"asked for {type_url}, got {response.type_url!r}",
            evidence,
        )
        self.note("nonce-present", bool(response.nonce), "no nonce", evidence)
        seen_nonces = [m.nonce for d, _, m in probe.log[:-1] if d == "<-"]
        self.note(
            "nonce-unique",
            response.nonce not in seen_nonces,
            f"nonce {response.nonce!r} reused on the stream",
            evidence,
        )
        self.note(
            "response-size", response.ByteSize() <= _MAX_RECEIVE, f"{response.ByteSize()} bytes", ""
        )
        if not self.delta:
            self.note(
                "sotw-version-present", bool(response.version_info), "empty version_info", evidence
            )
        names: list[str] = []
        for name, packed_type, body in _entries(response, self.delta):
            if self.delta:
                self.note("delta-resource-name", bool(name), "a resource without a name", evidence)
            if body is None:
                continue
            self.note(
                "any-type-consistent",
                packed_type == type_url,
                f"{name or '?'} packed as {packed_type!r}",
                evidence,
            )
            if packed_type == type_url:
                name = self._validate(type_url, name, body, evidence) or name
            names.append(name)
        for name, ttl in _ttls(response, self.delta):
            self.ttls[type_url, name] = ttl
        if self.delta:
            for resource in response.resources:
                if resource.HasField("resource"):
                    self.note(
                        "delta-resource-version",
                        bool(resource.version),
                        f"{resource.name} has no version",
                        evidence,
                    )
        duplicates = sorted({n for n in names if n and names.count(n) > 1})
        self.note("no-duplicate-names", not duplicates, f"named twice: {duplicates}", evidence)

    def _validate(self, type_url: str, name: str, body: bytes, evidence: str) -> str:
        rtype = BUILTIN_TYPES.get(type_url)
        if rtype is None:
            return name
        try:
            decoded, _ = rtype.decode(body)
        except ResourceDecodeError as exc:
            self.note("resources-valid", False, f"{exc.name or name}: {exc.message}", evidence)
            return exc.name or name
        self.note("resources-valid", True)
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


def _ttls(response: Any, delta: bool) -> list[tuple[str, float]]:
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


# ---------------------------------------------------------------------- discovery


async def discover(ctx: Context) -> None:
    """Fill ``ctx.served`` from what the server serves, noting the rules discovery touches."""
    listeners = await _fetch(ctx, LISTENER.type_url, ctx.listeners or None)
    routes: set[str] = set()
    clusters: set[str] = set()
    for _, body in listeners.values():
        view = _view(LISTENER.type_url, body)
        manager = getattr(view, "api_listener", None)
        if manager is None:
            continue
        if manager.route_config_name:
            routes.add(manager.route_config_name)
        elif manager.route_config is not None:
            clusters |= _clusters_of(manager.route_config)
    found_routes = await _fetch(ctx, ROUTE_CONFIGURATION.type_url, sorted(routes)) if routes else {}
    for _, body in found_routes.values():
        view = _view(ROUTE_CONFIGURATION.type_url, body)
        if view is not None:
            clusters |= _clusters_of(view)
    found_clusters = await _fetch(
        ctx, CLUSTER.type_url, None if not ctx.listeners else sorted(clusters)
    )
    assignments: set[str] = set()
    for name, (_, body) in found_clusters.items():
        view = _view(CLUSTER.type_url, body)
        if view is not None and view.type is ClusterType.EDS:
            assignments.add(view.eds_service_name or name)
    extra = {n for t, n in ctx.resources if t == ENDPOINT.type_url}
    found_eds = (
        await _fetch(ctx, ENDPOINT.type_url, sorted(assignments | extra))
        if assignments | extra
        else {}
    )
    for type_url, name in ctx.resources:
        if type_url not in (ENDPOINT.type_url,):
            await _fetch(ctx, type_url, [name])
    missing = sorted(
        [f"route {r}" for r in routes - set(found_routes)]
        + [f"cluster {c}" for c in clusters - set(found_clusters)]
        + [f"endpoints {a}" for a in assignments - set(found_eds)]
    )
    ctx.note("references-resolve", not missing, f"not served: {', '.join(missing)}")


async def _fetch(
    ctx: Context, type_url: str, names: list[str] | tuple[str, ...] | None
) -> dict[str, tuple[str, bytes]]:
    async with ctx.probe(type_url) as probe:
        try:
            await ctx.subscribe(probe, type_url, names or [])
            got = await ctx.collect(probe, type_url, set(names) if names else None)
        except StreamEnded as exc:
            ctx.note("initial-request-answered", False, f"stream ended: {exc}", probe.evidence())
            return {}
        answered = any(d == "<-" for d, _, _ in probe.log)
        if names is None:
            ctx.note(
                "wildcard-answered",
                answered,
                "no response to a wildcard subscription",
                probe.evidence(),
            )
        elif answered or not got:
            ctx.note("initial-request-answered", answered or None, "no response", probe.evidence())
        if names is not None:
            extra = sorted(set(got) - set(names))
            ctx.note(
                "only-requested-resources",
                not extra or (type_url in _FULL_STATE and not ctx.delta),
                f"not requested: {extra[:5]}",
                probe.evidence(),
            )
    ctx.served.setdefault(type_url, {}).update(got)
    return got


def _view(type_url: str, body: bytes) -> Any:
    try:
        return BUILTIN_TYPES[type_url].decode(body)[1]
    except ResourceDecodeError:
        return None


def _clusters_of(route_config: Any) -> set[str]:
    names = set()
    for vhost in route_config.virtual_hosts:
        for route in vhost.routes:
            action = route.action
            if action is None:
                continue
            if action.cluster:
                names.add(action.cluster)
            names.update(w.name for w in action.weighted_clusters)
    return names


# ---------------------------------------------------------------------- scenarios


def _pick(ctx: Context, prefer: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """A served type (in order of preference) and its names, sorted."""
    for type_url in prefer:
        names = sorted(ctx.served.get(type_url, {}))
        if names:
            return type_url, names
    return None


_INCREMENTAL_FIRST = (
    ENDPOINT.type_url,
    ROUTE_CONFIGURATION.type_url,
    CLUSTER.type_url,
    LISTENER.type_url,
)


async def _answer(ctx: Context, probe: Probe, type_url: str, names: list[str]) -> Any:
    """The next response, ACKed (SotW: restating ``names``); None on silence."""
    response = await ctx.receive(probe, type_url)
    if response is not None:
        await probe.ack(response, **({} if ctx.delta else {"resource_names": names}))
    return response


async def _quiet(ctx: Context, probe: Probe, type_url: str) -> Any:
    """A response within the quiet window (None: silence, as hoped)."""
    return await ctx.receive(probe, type_url, ctx.quiet)


async def scenario_subscriptions(ctx: Context) -> None:
    """ACK silence, node only first, newly requested and re-subscribed names answered."""
    picked = _pick(ctx, _INCREMENTAL_FIRST)
    if picked is None:
        return
    type_url, names = picked
    a, b = names[0], names[1] if len(names) > 1 else None
    async with ctx.probe(type_url) as probe:
        try:
            await ctx.subscribe(probe, type_url, [a])
            first = await _answer(ctx, probe, type_url, [a])
            got = resources_of(first) if first is not None else {}
            ctx.note(
                "requested-resources-supplied", a in got, f"{a} was not sent", probe.evidence()
            )
            if type_url not in _FULL_STATE or ctx.delta:
                extra = sorted(set(got) - {a})
                ctx.note(
                    "only-requested-resources",
                    not extra,
                    f"not requested: {extra[:5]}",
                    probe.evidence(),
                )
            echo = await _quiet(ctx, probe, type_url)
            ctx.note(
                "no-response-to-ack",
                echo is None,
                "a response followed a plain ACK",
                probe.evidence(),
            )
            if b is not None:
                await ctx.subscribe(probe, type_url, [a, b] if not ctx.delta else [b])
                second = await _answer(ctx, probe, type_url, [a, b])
                got = resources_of(second) if second is not None else {}
                ctx.note("new-name-resent", b in got, f"{b} was not sent", probe.evidence())
                ctx.note(
                    "node-first-request-only",
                    second is not None,
                    "a request without node went unanswered",
                    probe.evidence(),
                )
            await _resubscribe(ctx, probe, type_url, a, [a] + ([b] if b else []))
        except StreamEnded as exc:
            ctx.note("nack-keeps-stream", None)
            ctx.note("resubscribe-answered", False, f"stream ended: {exc}", probe.evidence())


async def _resubscribe(
    ctx: Context, probe: Probe, type_url: str, name: str, names: list[str]
) -> None:
    rest = [n for n in names if n != name]
    if ctx.delta:
        await probe.send(type_url=type_url, resource_names_unsubscribe=[name])
        await ctx.subscribe(probe, type_url, [name])
    else:
        await ctx.subscribe(probe, type_url, rest or [_MISSING])
        await _drain(ctx, probe, type_url, rest or [_MISSING])
        await ctx.subscribe(probe, type_url, names)
    got = await _until_named(ctx, probe, type_url, name, names)
    ctx.note("resubscribe-answered", got, f"{name} was not sent again", probe.evidence())
    if ctx.delta:
        await ctx.subscribe(probe, type_url, [name])  # already subscribed and held
        again = await _until_named(ctx, probe, type_url, name, names)
        ctx.note("delta-resubscribe-resent", again, f"{name} was not sent again", probe.evidence())


async def _drain(ctx: Context, probe: Probe, type_url: str, names: list[str]) -> None:
    for _ in range(_MAX_RESPONSES):
        response = await _quiet(ctx, probe, type_url)
        if response is None:
            return
        await probe.ack(response, **({} if ctx.delta else {"resource_names": names}))


async def _until_named(
    ctx: Context, probe: Probe, type_url: str, name: str, names: list[str]
) -> bool:
    """Whether a response naming ``name`` comes (each response ACKed) before silence."""
    for _ in range(_MAX_RESPONSES):
        response = await _answer(ctx, probe, type_url, names)
        if response is None:
            return False
        if name in resources_of(response):
            return True
    return False


async def scenario_nack(ctx: Context) -> None:
    """A NACK keeps the stream and does not bring the same version straight back."""
    picked = _pick(ctx, _INCREMENTAL_FIRST)
    if picked is None:
        return
    type_url, names = picked
    async with ctx.probe(type_url) as probe:
        try:
            await ctx.subscribe(probe, type_url, names[:1])
            first = await ctx.receive(probe, type_url)
            if first is None:
                return
            nack: dict[str, Any] = {
                "type_url": type_url,
                "response_nonce": first.nonce,
                "error_detail": {"code": 3, "message": "conformance NACK"},
            }
            if not ctx.delta:
                nack["resource_names"] = names[:1]
            await probe.send(**nack)
            again = await _quiet(ctx, probe, type_url)
            same = again is not None and resources_of(again) == resources_of(first)
            ctx.note(
                "no-resend-after-nack",
                not same,
                "the NACKed resources came straight back",
                probe.evidence(),
            )
            ctx.note("nack-keeps-stream", True)
        except StreamEnded as exc:
            ctx.note("nack-keeps-stream", False, f"stream ended: {exc}", probe.evidence())


async def scenario_stale_nonce(ctx: Context) -> None:
    """SotW: a request carrying a superseded nonce gets no response."""
    if ctx.delta:
        return
    picked = _pick(ctx, (CLUSTER.type_url, LISTENER.type_url))
    if picked is None:
        return
    type_url, names = picked
    a = names[0]
    async with ctx.probe(type_url) as probe:
        with contextlib.suppress(StreamEnded):
            await ctx.subscribe(probe, type_url, [a])
            first = await _answer(ctx, probe, type_url, [a])
            if first is None:
                return
            await _drain(ctx, probe, type_url, [a])
            await probe.send(
                type_url=type_url,
                resource_names=[a, _MISSING],
                version_info=first.version_info,
                response_nonce=first.nonce,
            )
            second = await _answer(ctx, probe, type_url, [a, _MISSING])
            if second is None:
                return  # no newer nonce: nothing is stale
            await _drain(ctx, probe, type_url, [a, _MISSING])
            await probe.send(
                type_url=type_url,
                resource_names=[a],
                version_info=first.version_info,
                response_nonce=first.nonce,
            )
            late = await _quiet(ctx, probe, type_url)
            ctx.note(
                "stale-nonce-ignored",
                late is None,
                "answered a request with a stale nonce",
                probe.evidence(),
            )


async def scenario_full_state(ctx: Context) -> None:
    """SotW LDS/CDS: after adding a name, the response carries every subscribed resource."""
    if ctx.delta:
        return
    for type_url in (CLUSTER.type_url, LISTENER.type_url):
        names = sorted(ctx.served.get(type_url, {}))
        if len(names) < 2:
            continue
        async with ctx.probe(type_url) as probe:
            with contextlib.suppress(StreamEnded):
                await ctx.subscribe(probe, type_url, names[:1])
                if await _answer(ctx, probe, type_url, names[:1]) is None:
                    return
                await ctx.subscribe(probe, type_url, names[:2])
                second = await _answer(ctx, probe, type_url, names[:2])
                got = set(resources_of(second)) if second is not None else set()
                ctx.note(
                    "sotw-full-state",
                    set(names[:2]) <= got,
                    f"the response after adding {names[1]} carried {sorted(got)}",
                    probe.evidence(),
                )
        return


async def scenario_unknown_type(ctx: Context) -> None:
    """ADS: an unknown type URL does not end the stream; other types are still served."""
    if not ctx.ads:
        return
    picked = _pick(ctx, (CLUSTER.type_url, LISTENER.type_url))
    if picked is None:
        return
    type_url, _ = picked
    async with ctx.probe(type_url) as probe:
        try:
            await ctx.subscribe(probe, _UNKNOWN_TYPE, ["x"])
            await ctx.subscribe(probe, type_url, [])
            response = None
            for _ in range(_MAX_RESPONSES):
                response = await probe.recv(ctx.timeout)
                if response is None or response.type_url == type_url:
                    break
            ctx.note(
                "unknown-type-survives",
                response is not None,
                "no answer after the unknown type",
                probe.evidence(),
            )
        except StreamEnded as exc:
            ctx.note("unknown-type-survives", False, f"stream ended: {exc}", probe.evidence())


async def scenario_delta(ctx: Context) -> None:
    """Delta: does-not-exist, phantom unsubscribes, explicit wildcard, initial versions."""
    if not ctx.delta:
        return
    picked = _pick(ctx, _INCREMENTAL_FIRST)
    if picked is None:
        return
    type_url, names = picked
    a = names[0]
    async with ctx.probe(type_url) as probe:
        try:
            await ctx.subscribe(probe, type_url, [_MISSING])
            response = await _answer(ctx, probe, type_url, [])
            told = response is not None and (
                _MISSING in response.removed_resources
                or any(
                    r.name == _MISSING and not r.HasField("resource") for r in response.resources
                )
            )
            ctx.note(
                "delta-does-not-exist", told, "nothing said of a missing resource", probe.evidence()
            )
            await probe.send(type_url=type_url, resource_names_unsubscribe=["never-subscribed"])
            await ctx.subscribe(probe, type_url, [a])
            ok = await _until_named(ctx, probe, type_url, a, [])
            ctx.note("delta-phantom-unsubscribe", ok, f"{a} not served after it", probe.evidence())
        except StreamEnded as exc:
            ctx.note("delta-phantom-unsubscribe", False, f"stream ended: {exc}", probe.evidence())
    await _initial_versions(ctx, type_url, a)
    await _explicit_wildcard(ctx)


async def _initial_versions(ctx: Context, type_url: str, name: str) -> None:
    version = ctx.served.get(type_url, {}).get(name, ("", b""))[0]
    if not version:
        return
    async with ctx.probe(type_url) as probe:
        with contextlib.suppress(StreamEnded):
            await ctx.subscribe(probe, type_url, [name], initial_resource_versions={name: version})
            response = await _quiet(ctx, probe, type_url)
            resent = response is not None and resources_of(response).get(name, ("",))[0] == version
            ctx.note(
                "delta-initial-versions",
                not resent,
                f"{name} at version {version} was sent again",
                probe.evidence(),
            )


async def _explicit_wildcard(ctx: Context) -> None:
    implicit = set(ctx.served.get(CLUSTER.type_url, {}))
    if not implicit or ctx.listeners:
        return
    async with ctx.probe(CLUSTER.type_url) as probe:
        with contextlib.suppress(StreamEnded):
            await ctx.subscribe(probe, CLUSTER.type_url, ["*"])
            got = await ctx.collect(probe, CLUSTER.type_url, implicit)
            ctx.note(
                "delta-explicit-wildcard",
                implicit <= set(got),
                f"'*' got {sorted(got)[:5]}, the implicit wildcard {sorted(implicit)[:5]}",
                probe.evidence(),
            )


#: the longest TTL the checker waits out (seconds)
_MAX_TTL_WAIT = 30.0


async def check_ttl(ctx: Context) -> None:
    """A resource served with a TTL is refreshed (a heartbeat or an update) before it expires."""
    if not ctx.ttls:
        ctx.note("ttl-refreshed", None, "no resource was served with a TTL")
        return
    (type_url, name), ttl = min(ctx.ttls.items(), key=lambda item: item[1])
    if ttl > _MAX_TTL_WAIT:
        ctx.note("ttl-refreshed", None, f"the shortest TTL ({ttl:g} s) is too long to wait out")
        return
    async with ctx.probe(type_url) as probe:
        try:
            await ctx.subscribe(probe, type_url, [name])
            first = await _answer(ctx, probe, type_url, [name])
            if first is None:
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + ttl
            refreshed = False
            while not refreshed and (left := deadline - loop.time()) > 0:
                response = await ctx.receive(probe, type_url, left)
                if response is None:
                    break
                await probe.ack(response, **({} if ctx.delta else {"resource_names": [name]}))
                refreshed = any(n == name for n, _ in _ttls(response, ctx.delta)) or (
                    name in resources_of(response)
                )
            ctx.note(
                "ttl-refreshed",
                refreshed,
                f"{name} (TTL {ttl:g} s) was not refreshed in time",
                probe.evidence(),
            )
        except StreamEnded as exc:
            ctx.note("ttl-refreshed", False, f"stream ended: {exc}", probe.evidence())


async def _guarded(scenario: Any, ctx: Context) -> None:
    """A scenario whose stream ended where the script did not expect it counts against the
    rule that keeps streams alive; anything else is the checker's own bug and propagates."""
    try:
        await scenario(ctx)
    except StreamEnded as exc:
        ctx.note(
            "nack-keeps-stream" if scenario is scenario_nack else "node-first-request-only",
            False,
            f"{scenario.__name__}: stream ended: {exc}",
        )


SCENARIOS = (
    scenario_subscriptions,
    scenario_nack,
    scenario_stale_nonce,
    scenario_full_state,
    scenario_unknown_type,
    scenario_delta,
)


async def run_variant(ctx: Context) -> list[Finding]:
    """Discover, then run every scenario; the findings of this variant."""
    try:
        await discover(ctx)
    except StreamEnded as exc:
        ctx.note("initial-request-answered", False, f"stream ended: {exc}")
    await asyncio.gather(*(_guarded(scenario, ctx) for scenario in SCENARIOS))
    await _guarded(check_ttl, ctx)
    return ctx.findings
