"""The scenarios the checker runs against a management server, one variant at a time.

Why scenarios, not one rule per connection: most rules need the same setup (discover what the
server serves, subscribe, ACK), so each scenario drives a fresh stream through a short script
and reports on every rule it touches; every response is also checked for the rules that apply
to any response (`Context.inspect`). Timing rules ("no response to a plain ACK") wait a bounded
quiet window.

Attribution: a failure is reported against the rule it breaks, and only that one. Each script
step names its rule (`Probe.step`), so a stream that ends mid-script fails that step's rule. The
node rule runs first, with a control: if requests without a node go unanswered but the same
requests with one are answered, ``node-first-request-only`` fails and every later scenario
sends the node on every request, so the other rules are judged on their own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from ..resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION
from ._context import FULL_STATE, MAX_RESPONSES, Context, Finding, resources_of, ttls_of
from ._discovery import discover
from ._lrs import scenario_lrs
from ._on_demand import scenario_on_demand
from ._probe import Probe
from ._rules import RuleId

__all__ = ["run_variant"]

_UNKNOWN_TYPE = "type.googleapis.com/xdsclient.conformance.NoSuchType"
_MISSING = "xdsclient-conformance-does-not-exist"
_INCREMENTAL_FIRST = (
    ENDPOINT.type_url,
    ROUTE_CONFIGURATION.type_url,
    CLUSTER.type_url,
    LISTENER.type_url,
)


def _pick(ctx: Context, prefer: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """A served type (in order of preference) and its names, sorted."""
    for type_url in prefer:
        names = sorted(ctx.served.get(type_url, {}))
        if names:
            return type_url, names
    return None


def _restating(ctx: Context, names: list[str]) -> dict[str, Any]:
    """The fields an ACK carries besides the nonce: SotW restates the names."""
    return {} if ctx.delta else {"resource_names": names}


async def _answer(ctx: Context, probe: Probe, type_url: str, names: list[str]) -> Any:
    """The next response, ACKed (SotW: restating ``names``); None on silence."""
    response = await ctx.receive(probe, type_url)
    if response is not None:
        await probe.ack(response, **_restating(ctx, names))
    return response


async def _quiet(ctx: Context, probe: Probe, type_url: str) -> Any:
    """A response within the quiet window (None: silence, as hoped)."""
    return await ctx.receive(probe, type_url, ctx.quiet)


async def _echo(
    ctx: Context, probe: Probe, type_url: str, held: dict[str, tuple[str, bytes]], names: list[str]
) -> Any:
    """A response to a plain ACK that changes no resource the probe holds (an echo); None when
    the quiet window passes in silence, or every response that came changed something (an
    update the server had to send, such as the demo's endpoints: ACKed, and the wait goes on)."""
    bodies = {name: body for name, (_, body) in held.items()}
    for _ in range(MAX_RESPONSES):
        response = await _quiet(ctx, probe, type_url)
        if response is None:
            return None
        got = {name: body for name, (_, body) in resources_of(response).items()}
        if all(_same(type_url, bodies.get(name), body) for name, body in got.items()):
            return response
        bodies.update(got)
        await probe.ack(response, **_restating(ctx, names))
    return None


def _same(type_url: str, old: bytes | None, new: bytes) -> bool:
    """Whether two bodies of a resource say the same: the same bytes, or the same message once
    parsed (a server may serialize maps in any order)."""
    if old is None or old == new:
        return old is not None
    message_class = _message_class(type_url)
    if message_class is None:
        return False
    try:
        return bool(message_class.FromString(old) == message_class.FromString(new))
    except DecodeError:  # a body that does not parse is not the same as one that did
        return False


def _message_class(type_url: str) -> Any:
    """The generated class of ``type_url``'s message, None when no loaded module defines it."""
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(type_url.rsplit("/", 1)[-1])
    except KeyError:
        return None
    return message_factory.GetMessageClass(descriptor)


async def _drain(ctx: Context, probe: Probe, type_url: str, names: list[str]) -> None:
    """ACK whatever comes until the quiet window passes in silence."""
    for _ in range(MAX_RESPONSES):
        response = await _quiet(ctx, probe, type_url)
        if response is None:
            return
        await probe.ack(response, **_restating(ctx, names))


async def _until_named(
    ctx: Context, probe: Probe, type_url: str, name: str, names: list[str]
) -> bool:
    """Whether a response naming ``name`` comes (each response ACKed) before silence."""
    for _ in range(MAX_RESPONSES):
        response = await _answer(ctx, probe, type_url, names)
        if response is None:
            return False
        if name in resources_of(response):
            return True
    return False


# ---------------------------------------------------------------------- node


async def scenario_node(ctx: Context) -> None:
    """A request after the first, without a node, is served; if it is only served with one,
    later scenarios send the node on every request."""
    picked = _pick(ctx, _INCREMENTAL_FIRST)
    if picked is None:
        return
    type_url, names = picked
    answered, evidence = await _second_request_answered(ctx, type_url, names[0], every=False)
    if answered:
        ctx.note(RuleId.NODE_FIRST_REQUEST_ONLY, True)
        return
    control, _ = await _second_request_answered(ctx, type_url, names[0], every=True)
    if not control:
        ctx.note(
            RuleId.NODE_FIRST_REQUEST_ONLY,
            None,
            "a later request went unanswered even with a node: other rules say why",
        )
        return
    ctx.node_always = True
    ctx.note(
        RuleId.NODE_FIRST_REQUEST_ONLY,
        False,
        "a request without a node went unanswered; the same request with one was answered",
        evidence,
    )


async def _second_request_answered(
    ctx: Context, type_url: str, name: str, *, every: bool
) -> tuple[bool, str]:
    """Subscribe to a missing name, then add ``name`` in a second request (carrying the node
    only if ``every``): whether ``name`` came, and the stream as evidence."""
    answered = False
    names = [_MISSING, name]
    async with ctx.probe(type_url, node_every_request=every) as probe:
        probe.step = None  # a stream that ends is judged by comparing the two runs
        await ctx.subscribe(probe, type_url, [_MISSING])
        await _drain(ctx, probe, type_url, [_MISSING])
        await ctx.subscribe(probe, type_url, names if not ctx.delta else [name])
        answered = await _until_named(ctx, probe, type_url, name, names)
    return answered, probe.evidence()


# ---------------------------------------------------------------------- subscriptions


async def scenario_subscriptions(ctx: Context) -> None:
    """Requested names supplied, ACK silence, newly requested and re-subscribed names answered."""
    picked = _pick(ctx, _INCREMENTAL_FIRST)
    if picked is None:
        return
    type_url, names = picked
    a, b = names[0], names[1] if len(names) > 1 else None
    async with ctx.probe(type_url) as probe:
        probe.step = RuleId.REQUESTED_RESOURCES_SUPPLIED
        await ctx.subscribe(probe, type_url, [a])
        first = await _answer(ctx, probe, type_url, [a])
        got = resources_of(first) if first is not None else {}
        ctx.note(
            RuleId.REQUESTED_RESOURCES_SUPPLIED, a in got, f"{a} was not sent", probe.evidence()
        )
        if type_url not in FULL_STATE or ctx.delta:
            extra = sorted(set(got) - {a})
            ctx.note(
                RuleId.ONLY_REQUESTED_RESOURCES,
                not extra,
                f"not requested: {extra[:5]}",
                probe.evidence(),
            )
        probe.step = RuleId.NO_RESPONSE_TO_ACK
        echo = await _echo(ctx, probe, type_url, got, [a])
        ctx.note(
            RuleId.NO_RESPONSE_TO_ACK,
            echo is None,
            "a response that changed nothing followed a plain ACK",
            probe.evidence(),
        )
        if b is not None:
            probe.step = RuleId.NEW_NAME_RESENT
            await ctx.subscribe(probe, type_url, [a, b] if not ctx.delta else [b])
            second = await _answer(ctx, probe, type_url, [a, b])
            got = resources_of(second) if second is not None else {}
            ctx.note(RuleId.NEW_NAME_RESENT, b in got, f"{b} was not sent", probe.evidence())
        await _resubscribe(ctx, probe, type_url, a, [a] + ([b] if b else []))


async def _resubscribe(
    ctx: Context, probe: Probe, type_url: str, name: str, names: list[str]
) -> None:
    probe.step = RuleId.RESUBSCRIBE_ANSWERED
    rest = [n for n in names if n != name]
    if ctx.delta:
        await probe.send(type_url=type_url, resource_names_unsubscribe=[name])
        await ctx.subscribe(probe, type_url, [name])
    else:
        await ctx.subscribe(probe, type_url, rest or [_MISSING])
        await _drain(ctx, probe, type_url, rest or [_MISSING])
        await ctx.subscribe(probe, type_url, names)
    got = await _until_named(ctx, probe, type_url, name, names)
    ctx.note(RuleId.RESUBSCRIBE_ANSWERED, got, f"{name} was not sent again", probe.evidence())
    if ctx.delta:
        probe.step = RuleId.DELTA_RESUBSCRIBE_RESENT
        await ctx.subscribe(probe, type_url, [name])  # already subscribed and held
        again = await _until_named(ctx, probe, type_url, name, names)
        ctx.note(
            RuleId.DELTA_RESUBSCRIBE_RESENT, again, f"{name} was not sent again", probe.evidence()
        )


async def scenario_nack(ctx: Context) -> None:
    """A NACK keeps the stream and does not bring the same version straight back."""
    picked = _pick(ctx, _INCREMENTAL_FIRST)
    if picked is None:
        return
    type_url, names = picked
    async with ctx.probe(type_url) as probe:
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
        probe.step = RuleId.NACK_KEEPS_STREAM
        await probe.send(**nack)
        again = await _quiet(ctx, probe, type_url)
        same = again is not None and resources_of(again) == resources_of(first)
        ctx.note(
            RuleId.NO_RESEND_AFTER_NACK,
            not same,
            "the NACKed resources came straight back",
            probe.evidence(),
        )
        ctx.note(RuleId.NACK_KEEPS_STREAM, True)


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
        await ctx.subscribe(probe, type_url, [a])
        first = await _answer(ctx, probe, type_url, [a])
        if first is None:
            return
        probe.step = RuleId.STALE_NONCE_IGNORED
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
            RuleId.STALE_NONCE_IGNORED,
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
            await ctx.subscribe(probe, type_url, names[:1])
            if await _answer(ctx, probe, type_url, names[:1]) is None:
                return
            probe.step = RuleId.SOTW_FULL_STATE
            await ctx.subscribe(probe, type_url, names[:2])
            second = await _answer(ctx, probe, type_url, names[:2])
            got = set(resources_of(second)) if second is not None else set()
            ctx.note(
                RuleId.SOTW_FULL_STATE,
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
        probe.step = RuleId.UNKNOWN_TYPE_SURVIVES
        await ctx.subscribe(probe, _UNKNOWN_TYPE, ["x"])
        await ctx.subscribe(probe, type_url, [])
        response = None
        for _ in range(MAX_RESPONSES):
            response = await probe.recv(ctx.timeout)
            if response is None or response.type_url == type_url:
                break
        ctx.note(
            RuleId.UNKNOWN_TYPE_SURVIVES,
            response is not None,
            "no answer after the unknown type",
            probe.evidence(),
        )


# ---------------------------------------------------------------------- Delta


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
        probe.step = RuleId.DELTA_DOES_NOT_EXIST
        await ctx.subscribe(probe, type_url, [_MISSING])
        response = await _answer(ctx, probe, type_url, [])
        told = response is not None and (
            _MISSING in response.removed_resources
            or any(r.name == _MISSING and not r.HasField("resource") for r in response.resources)
        )
        ctx.note(
            RuleId.DELTA_DOES_NOT_EXIST,
            told,
            "nothing said of a missing resource",
            probe.evidence(),
        )
        probe.step = RuleId.DELTA_PHANTOM_UNSUBSCRIBE
        await probe.send(type_url=type_url, resource_names_unsubscribe=["never-subscribed"])
        await ctx.subscribe(probe, type_url, [a])
        ok = await _until_named(ctx, probe, type_url, a, [])
        ctx.note(RuleId.DELTA_PHANTOM_UNSUBSCRIBE, ok, f"{a} not served after it", probe.evidence())
    await _initial_versions(ctx, type_url, a)
    await _explicit_wildcard(ctx)


async def _initial_versions(ctx: Context, type_url: str, name: str) -> None:
    version = ctx.served.get(type_url, {}).get(name, ("", b""))[0]
    if not version:
        return
    async with ctx.probe(type_url) as probe:
        probe.step = RuleId.DELTA_INITIAL_VERSIONS
        await ctx.subscribe(probe, type_url, [name], initial_resource_versions={name: version})
        response = await _quiet(ctx, probe, type_url)
        resent = response is not None and resources_of(response).get(name, ("",))[0] == version
        ctx.note(
            RuleId.DELTA_INITIAL_VERSIONS,
            not resent,
            f"{name} at version {version} was sent again",
            probe.evidence(),
        )


async def _explicit_wildcard(ctx: Context) -> None:
    implicit = set(ctx.served.get(CLUSTER.type_url, {}))
    if not implicit or ctx.listeners:
        return
    async with ctx.probe(CLUSTER.type_url) as probe:
        probe.step = RuleId.DELTA_EXPLICIT_WILDCARD
        await ctx.subscribe(probe, CLUSTER.type_url, ["*"])
        got = await ctx.collect(probe, CLUSTER.type_url, implicit)
        ctx.note(
            RuleId.DELTA_EXPLICIT_WILDCARD,
            implicit <= set(got),
            f"'*' got {sorted(got)[:5]}, the implicit wildcard {sorted(implicit)[:5]}",
            probe.evidence(),
        )


# ---------------------------------------------------------------------- TTL

#: the longest TTL the checker waits out (seconds)
_MAX_TTL_WAIT = 30.0


async def check_ttl(ctx: Context) -> None:
    """A resource served with a TTL is refreshed (a heartbeat or an update) before it expires."""
    if not ctx.ttls:
        ctx.note(RuleId.TTL_REFRESHED, None, "no resource was served with a TTL")
        return
    (type_url, name), ttl = min(ctx.ttls.items(), key=lambda item: item[1])
    if ttl > _MAX_TTL_WAIT:
        ctx.note(
            RuleId.TTL_REFRESHED, None, f"the shortest TTL ({ttl:g} s) is too long to wait out"
        )
        return
    async with ctx.probe(type_url) as probe:
        await ctx.subscribe(probe, type_url, [name])
        if await _answer(ctx, probe, type_url, [name]) is None:
            return
        probe.step = RuleId.TTL_REFRESHED
        refreshed = await _refreshed_within(ctx, probe, type_url, name, ttl)
        ctx.note(
            RuleId.TTL_REFRESHED,
            refreshed,
            f"{name} (TTL {ttl:g} s) was not refreshed in time",
            probe.evidence(),
        )


async def _refreshed_within(
    ctx: Context, probe: Probe, type_url: str, name: str, ttl: float
) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ttl
    while (left := deadline - loop.time()) > 0:
        response = await ctx.receive(probe, type_url, left)
        if response is None:
            return False
        await probe.ack(response, **_restating(ctx, [name]))
        if any(n == name for n, _ in ttls_of(response, ctx.delta)) or (
            name in resources_of(response)
        ):
            return True
    return False


SCENARIOS = (
    scenario_subscriptions,
    scenario_nack,
    scenario_stale_nonce,
    scenario_full_state,
    scenario_unknown_type,
    scenario_delta,
    scenario_on_demand,
    scenario_lrs,
)


async def run_variant(ctx: Context) -> list[Finding]:
    """Discover, check the node rule, then run every scenario; the findings of this variant."""
    await discover(ctx)
    await scenario_node(ctx)
    await asyncio.gather(*(scenario(ctx) for scenario in SCENARIOS))
    await check_ttl(ctx)
    return ctx.findings
