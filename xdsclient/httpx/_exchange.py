"""One request through an `XdsTransport`: the call path's plan driven over real attempts.

Why a driver per request: `CallPlan` (under Envoy's HTTP rules) decides the route, the
rewrites, the fault, the timeouts and the retries, and the picker picks; what is left is
waiting, sending and classifying. The driver waits out delays and back-offs, picks in each
attempt's cluster (avoiding the hosts the retry policy says to avoid where another can be had),
sends the attempt on that endpoint's connection with the attempt's path, authority and header
changes, classifies how it ended (a status, a reset, a connect failure, the per-try timeout),
and answers with the last attempt's response or the plan's local reply.

Why a direct path: most requests go where their route alone says, with nothing to retry,
fault, hash or change (`DirectRoute`, which the route's rules keep once a first request to the
authority and path found it so). Such a request draws its request hash as the plan would, picks,
and sends its attempt as every attempt is sent (`Exchange._send`); its response is the answer. Only
when that attempt does not simply answer (no pick now, a connect failure, a reset, a timeout)
is the plan made, the one `CallPlan.begin` would have made from the same draws, and driven
from that attempt on. So the usual request costs a pick and a send, not a plan.

The response body is streamed, never buffered: the attempt's response is handed to the caller
as it came, and the request counts as ended for the picker (outlier detection, least request,
circuit breaking), the cluster's load report and the connection when the caller closes the
body. So a retry is possible only before the response is handed over. A request body that
cannot be read again (a stream not yet read) is sent once: its attempt is committed.

What counts as a failure for outlier detection and load reports is what Envoy counts: a 5xx
response (502, 503 and 504 are its gateway failures), a reset, a connect failure, a timeout
while the response's headers are awaited: the route's or the try's, and httpx's own read or
write timeout passing first too (the upstream kept the request waiting: Envoy's
``upstream_rq_timeout``, which outlier detection takes as a 504). A request its caller gives up
on (its task cancelled) is Envoy's downstream reset, no upstream failure, and so is an attempt
that never reached its upstream (httpx's pool timeout, a request refused before it was sent):
the pick is handed back with no outcome and the load report counts it neither a success nor an
error. Once the headers came, a body the caller stops reading (or reads past its own timeout)
ends its attempt by the status that came, as Envoy records no timeout for a request whose
headers it has seen.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from types import MappingProxyType
from typing import NamedTuple

import httpcore
import httpx

from .. import Available, Missing, XdsError
from .._call import (
    Attempt,
    AttemptOutcome,
    CallPlan,
    CallRequest,
    CallState,
    Code,
    Finish,
    LocalReply,
    Status,
    apply_header_changes,
)
from .._call._http_retry import RETRIABLE_HEADER_NAMES_HEADER, carries_retry_headers
from .._call._http_route import DirectRoute
from .._call._plan import Step
from .._plane import DEADLINE, PickWait, follow_plan
from .._plane._tls_policy import TlsError
from ..lb import LocalFailure, PickOutcome, PickResult
from ._connections import HttpConnection, ResponseBody
from ._core import HttpCore, RouteWatch

__all__ = ["Exchange", "local_response"]

#: moves a ring-hash request hash to another place on the ring for a pick again (the 64-bit
#: golden ratio: successive picks spread over the ring)
_REHASH = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_CONNECT_FAILURES = (httpx.ConnectError,)
#: the request header naming response headers a retry looks at (Envoy's)
#: how early a timeout may fire and still be the attempt's deadline (timers are not exact)
_EARLY = 0.05
_RESETS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.CloseError)
_COMPLETE = PickOutcome.COMPLETE
_NO_NAMES: Mapping[str, str] = MappingProxyType({})


def _header_view(
    raw: list[tuple[bytes, bytes]], authority: str, method: str, path: str, scheme: str
) -> dict[str, str]:
    """The request's headers as the call path reads them (`CallRequest.headers` of the call
    `Exchange` makes: the pseudo-headers, then every header but Host by lower-case name, a
    repeated one's values joined with ``,``), made directly."""
    view = {":authority": authority, ":method": method, ":path": path, ":scheme": scheme}
    for name, value in raw:
        key = name.lower()
        if key == b"host":
            continue
        text, joined = key.decode("latin-1"), value.decode("latin-1")
        before = view.get(text)
        view[text] = joined if before is None else f"{before},{joined}"
    return view


class _Sending(NamedTuple):
    """The attempt in flight: its connection, ending, endpoint, request and deadline."""

    conn: HttpConnection
    ending: _Ending
    key: tuple[str, int]
    request: httpx.Request
    deadline: float | None


def local_response(reply: LocalReply) -> httpx.Response:
    """The response for a local answer of the call path."""
    return httpx.Response(status_code=reply.status, headers=list(reply.headers), content=reply.body)


class _Ending:
    """Ends one attempt once: the picker and the load report learn it (the connection counts
    its requests itself, until their responses close)."""

    __slots__ = ("_core", "_load", "_picked", "_started", "done", "status")

    def __init__(self, core: HttpCore, picked: PickResult) -> None:
        self._core = core
        self._picked = picked
        self._load = core.load_of(picked.cluster)
        self._started = core.clock()
        self.done = False
        #: the response's status, once it came (Envoy's outlier detection reads it)
        self.status: int | None = None
        if self._load is not None and picked.locality is not None:
            self._load.call_started(picked.locality)

    def end(self, ok: bool, failure: LocalFailure | None = None) -> None:
        if self.done:
            return
        self.done = True
        core, picked = self._core, self._picked
        now = core.clock()
        status = self.status if failure is None else None
        core.picker.call_finished(
            picked,
            ok,
            now,
            elapsed=now - self._started,
            http_status=status,
            local_failure=failure,
        )
        if self._load is not None and picked.locality is not None:
            self._load.call_finished(picked.locality, ok)

    def cancelled(self) -> None:
        """The caller gave up before the response came (Envoy's downstream reset): the pick
        is handed back with no outcome (circuit breaking and least request count it out;
        outlier detection counts nothing) and the load report counts it neither a success
        nor an error."""
        if self.done:
            return
        self.done = True
        picked = self._picked
        self._core.picker.call_abandoned(picked)
        if self._load is not None and picked.locality is not None:
            self._load.call_cancelled(picked.locality)

    def closed(self, cut: bool) -> None:
        """The response's body was closed: read whole or not by the caller's choice (counted
        by its status: a success below 500), or ``cut`` short by a failed read (a reset)."""
        if cut:
            self.end(False, LocalFailure.RESET)
        else:
            self.end(self.status is not None and self.status < 500)


class Exchange:
    """One request's drive (see the module's docstring)."""

    #: the next attempt's pick, made already (the direct path's, handed to the plan); a class
    #: default, set per request only when a plan takes over
    _first: PickResult | Status | PickWait | None = None

    def __init__(self, core: HttpCore, request: httpx.Request) -> None:
        self._core = core
        self._request = request
        self._plan: CallPlan | None = None
        #: the last attempt's response and its ending, until handed over or dropped
        self._response: httpx.Response | None = None
        self._ending: _Ending | None = None
        self._body: bytes | None = None
        #: the configuration of the request's authority
        self._route: RouteWatch | None = None
        #: the request's Host header, authority and path, as sent (an attempt that changes
        #: neither, nor any header, sends the request itself)
        self._host: str | None = None
        self._authority = ""
        self._path = ""
        #: the request's headers by lower-case name (the call's view)
        self._names: Mapping[str, str] = _NO_NAMES
        #: the attempt in flight: its connection, ending, endpoint, request, deadline
        self._sending: _Sending | None = None

    async def run(self) -> httpx.Response:
        """Drive the request to its response (few coroutines deep: each is entered again at
        every resume). The usual request (its authority's configuration there, its route's
        plan fixed: `DirectRoute`) awaits only `_send`; a plan takes over when its attempt
        does not simply answer."""
        try:
            route = self._ready()
            if route is None:
                configured = await self._configured()
                if isinstance(configured, httpx.Response):
                    return configured
                route = configured
            route.in_flight += 1
            try:
                direct = self._direct(route)
                if direct is None:
                    return self._answer(await self._follow(self._planned(route)))
                core = self._core
                now = core.clock()
                deadline = None if direct.timeout is None else now + direct.timeout
                request_hash = core.rng.getrandbits(64)
                first: PickResult | Status | PickWait | None
                first = core.pick_now(direct.cluster, self._names, request_hash, deadline)
                outcome: AttemptOutcome | None = None
                if first.__class__ is PickResult and first.outcome is _COMPLETE:
                    outcome = await self._send(first, self._request, deadline)
                    if outcome is None:
                        return self._hand_over()  # the usual request's end
                    first = None
                self._plan, attempt = route.rules.direct_plan(
                    direct, self._names, now=now, deadline=deadline,
                    request_hash=request_hash, rng=core.rng, faults=core.faults,
                )  # fmt: skip
                step = attempt if outcome is None else await self._after(outcome)
                return self._answer(await self._follow(step, first))
            finally:
                route.in_flight -= 1
        except BaseException:
            if self._plan is not None and self._plan.state is not CallState.DONE:
                self._plan.cancel()
            await self._drop(ok=False)
            raise

    def _ready(self) -> RouteWatch | None:
        """The request's authority; its config watch when the configuration is there now."""
        request = self._request
        self._host = request.headers.get("host")
        self._authority = self._host or request.url.netloc.decode("ascii")
        route = self._route = self._core.config_now(self._authority)
        return route

    async def _configured(self) -> httpx.Response | RouteWatch:
        """The config watch of the request's authority, its configuration waited for at its
        first request, or the local answer there is instead."""
        core, request, authority = self._core, self._request, self._authority
        wait = _timeout(request, "pool")
        deadline = None if wait is None else core.clock() + wait
        route, config = await core.call_config(authority, deadline)
        if isinstance(config, LocalReply):
            return local_response(config)
        if isinstance(config, Status):
            if config is DEADLINE:
                config = Status(
                    code=Code.UNAVAILABLE,
                    details=f"listener {core.listener}: no configuration for {authority} in "
                    f"{wait} s",
                )
            return local_response(_status_reply(config))
        self._route = route
        return route

    def _direct(self, route: RouteWatch) -> DirectRoute | None:
        """The request's fixed plan (`DirectRoute`) when it has one and can be sent as it is,
        with the request's header view made (`_names`); None: plan it."""
        request = self._request
        url = request.url
        path = self._path = url.raw_path.decode("ascii")
        config = route.config
        snapshot = route.snapshot
        if config is None or snapshot is None or self._host is None:
            return None
        direct = route.rules.direct(config, self._authority, path)
        if direct is None or direct.cluster not in snapshot.clusters:
            return None
        names = self._names = _header_view(
            request.headers.raw, self._authority, request.method, path, url.scheme
        )
        if carries_retry_headers(names):
            return None  # the router reads and removes them: plan it
        try:
            self._body = request.content
        except httpx.RequestNotRead:
            return direct  # a stream: sent once, as it is
        return direct if isinstance(request.stream, httpx.ByteStream) else None

    def _call(self) -> CallRequest:
        request = self._request
        url = request.url
        path = self._path = url.raw_path.decode("ascii")
        scheme = url.scheme
        authority = self._authority
        metadata = [
            (":authority", authority),
            (":method", request.method),
            (":path", path),
            (":scheme", scheme),
        ]
        metadata += [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.lower() != b"host"
        ]
        return CallRequest(
            authority=authority,
            path=path,
            metadata=tuple(metadata),
            method=request.method,
            scheme=scheme,
            grpc_rules=False,
        )

    def _planned(self, route: RouteWatch) -> Step:
        """The request's plan, decided by the route's rules: its first step."""
        core = self._core
        call = self._call()
        self._names = call.headers
        now = core.clock()
        assert route.config is not None
        plan = self._plan = CallPlan.begin(
            call, route.config, now=now, rng=core.rng, faults=core.faults, rules=route.rules
        )
        try:
            self._body = self._request.content
        except httpx.RequestNotRead:
            self._body = None  # a stream: sent once
        return plan.start(now)

    def _follow(
        self, step: Step, first: PickResult | Status | PickWait | None = None
    ) -> Awaitable[Finish]:
        """Follow the plan from ``step`` to its finish (``first``: the first attempt's pick,
        made already), on the caller's coroutine."""
        plan = self._plan
        assert plan is not None
        self._first = first
        return follow_plan(plan, step, self._attempt, self._sleep_until, self._core.clock)

    def _answer(self, finish: Finish) -> httpx.Response:
        """The request's answer at the plan's ``finish``: the last attempt's response, or a
        local one."""
        if finish.reply is not None or self._response is None:
            return local_response(finish.reply or _status_reply(finish.status))
        return self._hand_over()

    async def _attempt(self, step: Attempt) -> Step:
        """Pick (the pick made already first), send, and the plan's next step."""
        first, self._first = self._first, None
        picked = await self._picked(step, first)
        if isinstance(picked, AttemptOutcome):
            outcome = picked
        else:
            sent = await self._send(picked, self._outgoing(step), step.deadline)
            outcome = sent or self._answered()
        return await self._after(outcome)

    async def _after(self, outcome: AttemptOutcome) -> Step:
        """The plan's next step after an attempt ended with ``outcome`` (its response
        dropped unless it is the answer)."""
        plan = self._plan
        assert plan is not None
        step = plan.attempt_done(outcome, self._core.clock())
        if not isinstance(step, Finish) or step.reply is not None:
            await self._drop(ok=outcome.http_status is not None)
        return step

    async def _sleep_until(self, until: float) -> None:
        core = self._core
        while core.clock() < until:
            if core.closed:
                raise httpx.TransportError("the XdsTransport is closed")
            await core.wait_change(core.changed(), until)

    async def _picked(
        self, step: Attempt, first: PickResult | Status | PickWait | None = None
    ) -> PickResult | AttemptOutcome:
        """The attempt's pick (its cluster resolved first when the route names it at request
        time), or how the attempt ends without one (``first``: the pick made already)."""
        route = self._route
        snapshot = route.snapshot if route is not None else None
        if first is None and snapshot is not None and step.cluster not in snapshot.clusters:
            missing = await self._request_time_cluster(step.cluster)
            if missing is not None:
                return missing
        return await self._pick(step, first)

    async def _request_time_cluster(self, cluster: str) -> AttemptOutcome | None:
        """Have ``cluster`` in the picker when the route resolves it at request time (a
        ``cluster_header`` route, or one Envoy's on-demand filter covers), as Envoy's
        on-demand CDS does: None once it is there, else the 503 the request ends with."""
        route, plan = self._route, self._plan
        snapshot = route.snapshot if route is not None else None
        if snapshot is None or plan is None or plan.choice is None:
            return None
        if cluster in snapshot.clusters:
            return None
        timeout = snapshot.on_demand_timeout(plan.choice.route)
        if timeout is None or route is None:
            return None  # walked ahead: the picker says why it cannot pick
        try:
            outcome = await route.watch.resolve_cluster(cluster, timeout=timeout)
        except (XdsError, ValueError) as error:
            return AttemptOutcome(reply=LocalReply.error(503, f"cluster {cluster}: {error}"))
        if isinstance(outcome, Available):
            self._core.catch_up(route)
            return None
        why = "does not exist" if isinstance(outcome, Missing) else f"not found in {timeout} s"
        return AttemptOutcome(
            reply=LocalReply.error(503, f"CDS resource {cluster}: {why} (on demand)")
        )

    def _picks(self, step: Attempt) -> int:
        """How many picks an attempt may make to find a host it need not avoid: one, and
        with hosts to avoid Envoy's ``host_selection_retry_max_attempts`` more."""
        choice = self._plan.choice if self._plan is not None else None
        if not step.avoid or choice is None:
            return 1
        policy = choice.action.retry_policy or choice.virtual_host.retry_policy
        return 1 + (policy.host_selection_retry_max_attempts if policy is not None else 1)

    async def _pick(
        self, step: Attempt, first: PickResult | Status | PickWait | None
    ) -> PickResult | AttemptOutcome:
        core = self._core
        picks = self._picks(step)
        request_hash = step.request_hash
        for tries in range(picks):
            if first is not None:
                picked, first = first, None
            else:
                picked = core.pick_now(step.cluster, self._names, request_hash, step.deadline)
            if isinstance(picked, PickWait):
                picked = await core.wait_pick(picked)
            if isinstance(picked, Status):
                if picked is DEADLINE:
                    return AttemptOutcome(timed_out=True, details=picked.details)
                return AttemptOutcome(reply=_status_reply(picked), details=picked.details)
            if picked.outcome is PickOutcome.DROP:
                load = core.load_of(picked.cluster)
                if load is not None:
                    load.call_dropped(picked.drop_category or None)
                return AttemptOutcome(reply=LocalReply.error(503, picked.error or "dropped"))
            endpoint = picked.endpoint
            assert endpoint is not None
            avoided = (endpoint.address, endpoint.port) in step.avoid
            if not avoided or tries == picks - 1:
                return picked  # Envoy too takes the last host picked when all are avoided
            # given back unused: no outcome for outlier detection, least request or reports
            core.picker.call_abandoned(picked)
            request_hash = (request_hash + _REHASH) & _MASK  # ring hash: elsewhere on the ring
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send(
        self, picked: PickResult, outgoing: httpx.Request, deadline: float | None
    ) -> AttemptOutcome | None:
        """Send an attempt on ``picked``'s connection: None once its response came (kept
        for `_answered` or `_hand_over`), else how the attempt ended."""
        started = self._begin(picked, outgoing, deadline)
        if isinstance(started, AttemptOutcome):
            return started
        conn, request = started
        try:
            answer = await conn.pool.handle_async_request(request)
        except BaseException as error:
            return self._failed(error)
        return self._received(answer)

    def _begin(
        self, picked: PickResult, outgoing: httpx.Request, deadline: float | None
    ) -> tuple[HttpConnection, httpcore.Request] | AttemptOutcome:
        """An attempt starts on ``picked``'s connection: the connection and what to give its
        pool, or how the attempt ended at once (a connect failure)."""
        core = self._core
        endpoint = picked.endpoint
        assert endpoint is not None
        key = (endpoint.address, endpoint.port)
        try:
            conn = core.connect(key, picked.cluster)
        except (TlsError, RuntimeError) as error:  # TLS refused, or closed: a connect failure
            core.picker.call_finished(
                picked, False, core.clock(), local_failure=LocalFailure.CONNECT
            )
            return AttemptOutcome(connect_failure=True, endpoint=key, details=str(error))
        self._sending = _Sending(conn, _Ending(core, picked), key, outgoing, deadline)
        timeout = None if deadline is None else max(0.0, deadline - core.clock())
        try:
            return conn, conn.begin(outgoing, timeout)
        except BaseException as error:
            return self._failed(error, mapped=True)  # begin raises httpx's errors

    def _failed(self, error: BaseException, *, mapped: bool = False) -> AttemptOutcome:
        """The attempt in flight raised ``error`` (httpcore's, unless ``mapped``): how it
        ended, or (re-raised) the caller's own error."""
        sending = self._sending
        assert sending is not None
        core, ending, key = self._core, sending.ending, sending.key
        committed = self._body is None
        if not mapped:
            error = sending.conn.failed(error, sending.request)
        if isinstance(error, httpx.TimeoutException):
            if isinstance(error, httpx.ConnectTimeout):
                ending.end(False, LocalFailure.CONNECT)
                return AttemptOutcome(
                    connect_failure=True, endpoint=key, details=str(error), committed=committed
                )
            deadline = sending.deadline
            if deadline is not None and core.clock() >= deadline - _EARLY:
                ending.end(False, LocalFailure.TIMEOUT)  # the route's (or the try's) deadline
                return AttemptOutcome(timed_out=True, endpoint=key, committed=committed)
            if isinstance(error, httpx.PoolTimeout):
                ending.cancelled()  # never reached the upstream: no host to blame
            else:
                ending.end(False, LocalFailure.TIMEOUT)  # the upstream kept the caller waiting
            raise error  # the caller's own (httpx) timeout: as httpx raises it
        if isinstance(error, _CONNECT_FAILURES):
            ending.end(False, LocalFailure.CONNECT)
            return AttemptOutcome(
                connect_failure=True, endpoint=key, details=str(error), committed=committed
            )
        if isinstance(error, _RESETS):
            ending.end(False, LocalFailure.RESET)
            return AttemptOutcome(reset=True, endpoint=key, details=str(error), committed=committed)
        ending.cancelled()  # the caller's (cancelled, or its request refused): not upstream's
        raise error

    def _received(self, answer: httpcore.Response) -> AttemptOutcome | None:
        """The pool answered the attempt in flight: its response is the attempt's (None), or
        how the attempt ended when wrapping it failed."""
        sending = self._sending
        assert sending is not None
        try:
            response = sending.conn.response(answer, sending.request)
        except BaseException as error:
            return self._failed(error, mapped=True)
        self._response, self._ending = response, sending.ending
        sending.ending.status = response.status_code
        return None

    def _answered(self) -> AttemptOutcome:
        """How the attempt that got its response ended, for the plan."""
        sending, response = self._sending, self._response
        assert sending is not None
        assert response is not None
        status = response.status_code
        return AttemptOutcome(
            http_status=status,
            headers=self._response_headers(response),
            endpoint=sending.key,
            committed=self._body is None,
            code=Code.OK if status < 500 else Code.UNAVAILABLE,
        )

    def _response_headers(self, response: httpx.Response) -> tuple[tuple[str, str], ...]:
        """A response's headers (lower-case names) when a retry may look at them
        (``retriable-headers``, the route's or the request's ``x-envoy-retriable-header-names``),
        else none: most requests never need them."""
        choice = self._plan.choice if self._plan is not None else None
        policy = None
        if choice is not None:
            policy = choice.action.retry_policy or choice.virtual_host.retry_policy
        wanted = (policy is not None and policy.retriable_headers) or (
            RETRIABLE_HEADER_NAMES_HEADER in self._names
        )
        if not wanted:
            return ()
        return tuple((k.lower(), v) for k, v in response.headers.multi_items())

    def _outgoing(self, step: Attempt) -> httpx.Request:
        request = self._request
        if (
            not step.headers_to_remove
            and not step.headers_to_add
            and step.authority == self._host
            and step.path == self._path
            and (self._body is None or isinstance(request.stream, httpx.ByteStream))
        ):
            return request  # the usual request: sent as it is (a byte body can be sent again)
        raw = request.headers.raw
        headers: list[tuple[bytes, bytes]] | list[tuple[str, str]]
        if not step.headers_to_remove and not step.headers_to_add:  # the usual request
            headers = [(b"host", step.authority.encode("ascii"))]
            headers.extend(pair for pair in raw if pair[0].lower() != b"host")
        else:
            headers = apply_header_changes(
                (
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in raw
                    if k.lower() != b"host"
                ),
                step.headers_to_remove,
                step.headers_to_add,
            )
            headers.insert(0, ("host", step.authority))
        # the connection sends to its endpoint, with its scheme: only the target is ours
        url = request.url
        target = step.path.encode("ascii")
        if target != url.raw_path:  # rewritten
            url = url.copy_with(raw_path=target)
        body = self._body
        return httpx.Request(
            request.method,
            url,
            headers=headers,
            stream=request.stream if body is None else httpx.ByteStream(body),
            extensions=request.extensions,
        )

    def _hand_over(self) -> httpx.Response:
        response, ending = self._response, self._ending
        assert response is not None
        assert ending is not None
        self._response = self._ending = None
        stream = response.stream
        assert isinstance(stream, ResponseBody)
        # the response as it came, its body ending the attempt when closed
        stream.on_close = ending.closed
        return response

    async def _drop(self, *, ok: bool) -> None:
        """Close the last attempt's response, not handed over (a retry follows, or a local
        answer replaces it)."""
        response, ending = self._response, self._ending
        self._response = self._ending = None
        if response is None or ending is None:
            return
        try:
            await response.aclose()
        finally:
            ending.end(ok and response.status_code < 500)


def _status_reply(status: Status) -> LocalReply:
    """A local answer for a status of the shared shell: 504 for a deadline, else 503."""
    http = 504 if status.code is Code.DEADLINE_EXCEEDED else 503
    return LocalReply.error(http, status.details)


def _timeout(request: httpx.Request, kind: str) -> float | None:
    timeouts = request.extensions.get("timeout")
    if isinstance(timeouts, dict):
        value = timeouts.get(kind)
        return float(value) if value is not None else None
    return None
