"""One request through an `XdsTransport`: the call path's plan driven over real attempts.

Why a driver per request: `CallPlan` (under Envoy's HTTP rules) decides the route, the
rewrites, the fault, the timeouts and the retries, and the picker picks; what is left is
waiting, sending and classifying. The driver waits out delays and back-offs, picks in each
attempt's cluster (avoiding the hosts the retry policy says to avoid where another can be had),
sends the attempt on that endpoint's connection with the attempt's path, authority and header
changes, classifies how it ended (a status, a reset, a connect failure, the per-try timeout),
and answers with the last attempt's response or the plan's local reply.

The response body is streamed, never buffered: the attempt's response is handed to the caller
as it came, and the request counts as ended for the picker (outlier detection, least request,
circuit breaking), the cluster's load report and the connection when the caller closes the
body. So a retry is possible only before the response is handed over. A request body that
cannot be read again (a stream not yet read) is sent once: its attempt is committed.

What counts as a failure for outlier detection and load reports is what Envoy counts: a 5xx
response (502, 503 and 504 are its gateway failures), a reset, a connect failure, a timeout.
A request its caller gives up on (its task cancelled, httpx's own timeout passing before the
route's) is Envoy's downstream reset, no upstream failure: an attempt still waiting for its
response is handed back to the picker with no outcome and counted in the load report as
neither a success nor an error; a body the caller stops reading ends its attempt by the status
that came.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx

from .. import Available, Missing, XdsError
from .._call import (
    Attempt,
    AttemptOutcome,
    CallConfig,
    CallPlan,
    CallRequest,
    CallState,
    Code,
    Delay,
    Finish,
    LocalReply,
    RetryAt,
    Status,
    apply_header_changes,
)
from .._plane import DEADLINE, PickWait
from .._plane._tls_policy import TlsError
from ..lb import LocalFailure, PickOutcome, PickResult
from ._connections import ResponseBody
from ._core import HttpCore, RouteWatch

__all__ = ["Exchange", "local_response"]

#: moves a ring-hash request hash to another place on the ring for a pick again (the 64-bit
#: golden ratio: successive picks spread over the ring)
_REHASH = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_CONNECT_FAILURES = (httpx.ConnectError,)
#: the request header naming response headers a retry looks at (Envoy's)
_RETRIABLE_HEADERS = "x-envoy-retriable-header-names"
#: how early a timeout may fire and still be the attempt's deadline (timers are not exact)
_EARLY = 0.05
_RESETS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.CloseError)


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
        #: the request's Host header and path, as sent (an attempt that changes neither, nor
        #: any header, sends the request itself)
        self._host: str | None = None
        self._path = ""
        #: the request's headers by lower-case name (the call's view)
        self._names: Mapping[str, str] | None = None

    async def run(self) -> httpx.Response:
        """Drive the request to its response (few coroutines deep: each is entered again at
        every resume)."""
        try:
            configured = await self._configured()
            if isinstance(configured, httpx.Response):
                return configured
            call, config, route = configured
            route.in_flight += 1
            try:
                return await self._routed(call, config, route)
            finally:
                route.in_flight -= 1
        except BaseException:
            if self._plan is not None and self._plan.state is not CallState.DONE:
                self._plan.cancel()
            await self._drop(ok=False)
            raise

    async def _configured(self) -> httpx.Response | tuple[CallRequest, CallConfig, RouteWatch]:
        """The request as a call, its authority's configuration and config watch (waited for
        at its first request), or the local answer there is instead."""
        core, request = self._core, self._request
        self._host = request.headers.get("host")
        authority = self._host or request.url.netloc.decode("ascii")
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
        call = self._call(authority)
        self._names = call.headers
        return call, config, route

    def _call(self, authority: str) -> CallRequest:
        request = self._request
        url = request.url
        path = self._path = url.raw_path.decode("ascii")
        scheme = url.scheme
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

    async def _routed(
        self, call: CallRequest, config: CallConfig, route: RouteWatch
    ) -> httpx.Response:
        core = self._core
        now = core.clock()
        plan = self._plan = CallPlan.begin(
            call, config, now=now, rng=core.rng, faults=core.faults, rules=route.rules
        )
        try:
            self._body = self._request.content
        except httpx.RequestNotRead:
            self._body = None  # a stream: sent once
        step = plan.start(now)
        while True:
            if isinstance(step, Attempt):
                picked = await self._picked(step, call)
                if isinstance(picked, AttemptOutcome):
                    outcome = picked
                else:
                    outcome = await self._send(step, picked)
                step = plan.attempt_done(outcome, core.clock())
                if not isinstance(step, Finish) or step.reply is not None:
                    await self._drop(ok=outcome.http_status is not None)
            elif isinstance(step, Delay):
                await self._sleep_until(step.until)
                step = plan.delay_elapsed(core.clock())
            elif isinstance(step, RetryAt):
                await self._sleep_until(step.at)
                step = plan.backoff_elapsed(core.clock())
            else:
                assert isinstance(step, Finish)
                if step.at > core.clock():
                    await self._sleep_until(step.at)
                if step.reply is not None or self._response is None:
                    return local_response(step.reply or _status_reply(step.status))
                return self._hand_over()

    async def _sleep_until(self, until: float) -> None:
        core = self._core
        while core.clock() < until:
            if core.closed:
                raise httpx.TransportError("the XdsTransport is closed")
            await core.wait_change(core.changed(), until)

    async def _picked(self, step: Attempt, call: CallRequest) -> PickResult | AttemptOutcome:
        """The attempt's pick (its cluster resolved first when the route names it at request
        time), or how the attempt ends without one."""
        route = self._route
        snapshot = route.snapshot if route is not None else None
        if snapshot is not None and step.cluster not in snapshot.clusters:
            missing = await self._request_time_cluster(step.cluster)
            if missing is not None:
                return missing
        return await self._pick(step, call)

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

    async def _pick(self, step: Attempt, call: CallRequest) -> PickResult | AttemptOutcome:
        core = self._core
        picks = self._picks(step)
        request_hash = step.request_hash
        for tries in range(picks):
            picked = core.pick_now(step.cluster, call.headers, request_hash, step.deadline)
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

    async def _send(self, step: Attempt, picked: PickResult) -> AttemptOutcome:
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
        ending = _Ending(core, picked)
        outgoing = self._outgoing(step)
        timeout = None if step.deadline is None else max(0.0, step.deadline - core.clock())
        committed = self._body is None
        try:
            core_request = conn.begin(outgoing, timeout)
            try:
                answer = await conn.pool.handle_async_request(core_request)
            except BaseException as error:
                raise conn.failed(error, outgoing)  # noqa: B904 - failed() gives its cause
            response = conn.response(answer, outgoing)
        except httpx.TimeoutException as error:
            if isinstance(error, httpx.ConnectTimeout):
                ending.end(False, LocalFailure.CONNECT)
                return AttemptOutcome(
                    connect_failure=True, endpoint=key, details=str(error), committed=committed
                )
            if step.deadline is None or core.clock() < step.deadline - _EARLY:
                ending.cancelled()  # the caller's own (httpx) timeout: it gave up
                raise  # as httpx raises it
            ending.end(False, LocalFailure.TIMEOUT)
            return AttemptOutcome(timed_out=True, endpoint=key, committed=committed)
        except _CONNECT_FAILURES as error:
            ending.end(False, LocalFailure.CONNECT)
            return AttemptOutcome(
                connect_failure=True, endpoint=key, details=str(error), committed=committed
            )
        except _RESETS as error:
            ending.end(False, LocalFailure.RESET)
            return AttemptOutcome(reset=True, endpoint=key, details=str(error), committed=committed)
        except asyncio.CancelledError:
            ending.cancelled()
            raise
        except BaseException:
            ending.end(False)
            raise
        self._response, self._ending = response, ending
        status = ending.status = response.status_code
        return AttemptOutcome(
            http_status=status,
            headers=self._response_headers(response),
            endpoint=key,
            committed=committed,
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
            self._names is not None and _RETRIABLE_HEADERS in self._names
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
