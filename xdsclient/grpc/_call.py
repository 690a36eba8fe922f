"""One RPC on an `XdsChannel`: the call path's plan driven over real attempts.

Why a driver per call: `CallPlan` decides (route, fault, deadline, attempts, retries) and the
picker picks; what is left is gRPC's call object and the waiting. The driver runs the plan: it
waits out delays and backoffs, picks in each attempt's cluster (waiting while the pick
queues, never past the call's deadline), sends the attempt on that endpoint's connection with
``grpc-previous-rpc-attempts``, classifies how it ended, and tells the picker (outlier detection,
least request, circuit breaking, and the ORCA load report of the attempt's trailers for weighted
round robin and custom policies) and the cluster's load reporter (with the report's named
metrics). The caller sees grpc.aio's
call objects: awaitable, iterable, with metadata, code and details, and a failure is always a
`grpc.aio.AioRpcError` with gRPC's code and details.

Where the driver runs: a unary call runs on the task that awaits it (``await stub.Say(...)``, the
usual way), so it costs no task, no extra turn of the loop and no done-callbacks; if nobody has
awaited it by the loop's next turn it starts on a task of its own, as grpc.aio's call starts at
once. Cancelling a call running on its awaiter's task cancels that task's wait, and the
cancellation is taken back from the task (``uncancel``): the awaiter sees `CancelledError` as
from grpc.aio's call, and its own cancellation count is left as it was. The other kinds (their
messages are read and written from other coroutines while the driver runs) start on a task at
once.

A response stream is read from the attempt's grpc.aio call one message at a time, the next
once the caller took the one before (gRPC gives a stream's messages and status only as they
are read). A stream whose attempt deadline (the caller's, or the route's max stream
duration) passes with a message unread ends then, DEADLINE_EXCEEDED, as grpc.aio's own does
whatever it holds unread, and its counts end with it; a stream that fails or is cancelled
drops the messages its caller has not read, as grpc.aio's does.

A request-streaming call is retried as C-core's retry filter does (gRFC A6): its messages are
read once from the caller (its iterator or its ``write`` calls) into a `RequestStream`, which
keeps them for replay and sends each attempt the kept ones first, then the new ones; the call
commits (its current attempt is its last) once the kept bytes pass the channel's
``grpc.per_rpc_retry_buffer_size``, or when the server's response headers or a message reach
it. A call its route allows one attempt keeps nothing: grpc.aio's call takes the caller's
iterator or writes, as a plain channel's does. A unary call commits on the server's headers
too. grpc.aio does not tell a response that began with empty headers from a Trailers-Only one,
so headers commit the call when they carry metadata (C-core: any headers). With
``grpc.enable_retries`` 0 in the channel options every call makes one attempt, as C-core
without its retry filter.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Mapping
from typing import Any, Protocol

import attrs
import grpc

from .._call import (
    Attempt,
    AttemptOutcome,
    CallConfig,
    CallPlan,
    CallRequest,
    CallState,
    Code,
    LazyHeaderView,
    Status,
    grpc_header_view,
)
from .._call._plan import Step
from .._call._retry import DEADLINE_EXCEEDED
from .._call_status import LOCAL_WRITE_FAILURE, CallStatuses
from .._plane import PickWait, follow_plan
from ..lb import PickOutcome, PickResult
from ._core import CLOSED, ChannelCore
from ._orca import load_report_of, named_metrics
from ._requests import RequestStream, RetryBuffer, metadata_size
from ._status import outcome_of, refused_by_core, rpc_error
from ._tls import TlsError

__all__ = ["CallTarget", "Starter", "XdsCall"]

_PREVIOUS = "grpc-previous-rpc-attempts"
_UNARY = (False, False)
#: the endpoints' multi-callables a channel's multi-callable keeps, then starts over
_ENDPOINTS_KEPT = 64
#: the header view of a call without metadata (the usual call): only gRPC's content-type
_NO_METADATA_HEADERS = grpc_header_view(())
_OK = AttemptOutcome(code=Code.OK)
#: how C-core words the end of a stream whose deadline passed with a message unread
_UNREAD_AT_DEADLINE = Status(
    code=Code.DEADLINE_EXCEEDED, details="Stream removed (Deadline Exceeded)"
)
_END = object()
_UNKNOWN: Any = object()
#: the key of an endpoint's multi-callable sending bytes (a retried stream serializes itself)
_BYTES = object()
Metadata = tuple[tuple[str, str | bytes], ...]


@attrs.frozen(kw_only=True)
class CallTarget:
    """What every call made by one multi-callable shares, built once with it (the arguments
    of `XdsCall` and `unary_call` besides grpc.aio's per-call ones)."""

    #: the channel's core
    core: ChannelCore
    method: str
    serializer: Callable[[Any], bytes] | None
    deserializer: Callable[[bytes], Any] | None
    #: the channel's calls still running (a call leaves it when it ends)
    registry: set[Any]
    #: endpoint channel -> grpc.aio's multi-callable of `method` on it, shared by the calls
    multicallables: dict[Any, Any]
    #: starts the unary calls nobody awaited by the loop's next turn
    starter: Starter
    #: whether generated code registered the method (``_registered_method``): its calls on
    #: the endpoints' channels are registered calls too
    registered: bool = False


class XdsCall(
    grpc.aio.UnaryUnaryCall,  # type: ignore[type-arg]
    grpc.aio.UnaryStreamCall,  # type: ignore[type-arg]
    grpc.aio.StreamUnaryCall,  # type: ignore[type-arg]
    grpc.aio.StreamStreamCall,  # type: ignore[type-arg]
):
    """One call of any of the four kinds (the multi-callable decides which methods apply)."""

    # What is None or False at first is a class default (set per call only when it changes).
    _plan: CallPlan | None = None
    #: the attempt's grpc.aio call, once one was sent
    _current: Any = None
    #: whether the first attempt was sent or the call ended (`_started_event` is made for a
    #: waiter only)
    _started = False
    _started_event: asyncio.Event | None = None
    #: a response stream's messages, read one by one (None for a unary response)
    _responses: asyncio.Queue[Any] | None = None
    _response: Any = None
    _error: grpc.aio.AioRpcError | None = None
    #: the ORCA load report of the last attempt's trailers (None: none came)
    _load_report: Any = None
    _closed_by_channel = False
    #: the driver's task, when the call runs on its own
    _task: asyncio.Task[Any] | None = None
    #: the awaiter's task the driver runs on, while it does
    _owner: asyncio.Task[Any] | None = None
    #: whether `cancel` cancelled the owner's wait (taken back when the driver sees it)
    _cancelled_owner = False
    #: how the call ended: None while it runs, else (result, error, cancelled)
    _outcome: tuple[Any, BaseException | None, bool] | None = None
    #: woken when the call ends (made for a waiter only)
    _ended_future: asyncio.Future[None] | None = None
    #: done callbacks waiting for the end (None: none yet)
    _callbacks: list[Callable[[Any], None]] | None = None
    #: whether the call waits for `Starter` (a unary call nobody awaited yet)
    _kick = False
    #: a request-streaming call's messages, kept for its retries (None while the plan is not
    #: made, and for a call allowed one attempt: grpc.aio's call takes the caller's messages)
    _requests: RequestStream | None = None
    #: whether a response (headers with metadata, or a message) reached the call, or retries
    #: are off on the channel: no retry
    _committed = False
    #: whether generated code registered the method (``_registered_method``): its attempts
    #: are registered calls on the endpoints' channels
    _registered = False
    #: the call as the plan sees it (made with the plan)
    _call_request: CallRequest
    #: a direct call's first pick, made as the call was (`unary_call`), and the hash drawn
    #: for it (None: the call picks when it runs)
    _picked: Any = None
    _picked_in = ""
    _request_hash = 0

    def __init__(
        self,
        target: CallTarget,
        kind: tuple[bool, bool],
        request: Any,
        timeout: float | None,
        metadata: Iterable[tuple[str, str | bytes]] | None,
        credentials: grpc.CallCredentials | None,
        wait_for_ready: bool | None,
        compression: grpc.Compression | None,
    ) -> None:
        """A call of ``kind`` (request streaming, response streaming) made by ``target``'s
        multi-callable, with grpc.aio's arguments. (Its makers pass every argument by
        position: a class called with keywords builds a dict of them per call.)"""
        core = self._core = target.core
        self._method = target.method
        self._request = request
        self._kind = kind
        self._request_streaming, self._response_streaming = kind
        self._serializer = target.serializer
        self._deserializer = target.deserializer
        self._deadline = None if timeout is None else core.clock() + timeout
        self._metadata: Metadata = tuple(metadata) if metadata else ()
        self._credentials = credentials
        self._wait_for_ready = bool(wait_for_ready)
        self._compression = compression
        #: the calls of the channel still running: the call leaves it when it ends
        self._registry = target.registry
        #: endpoint channel -> grpc.aio's multi-callable for this call's method (kept by the
        #: channel's multi-callable, shared by its calls)
        self._multicallables = target.multicallables
        if target.registered:
            self._registered = True
        if kind == _UNARY:
            self._kick = True
            target.starter.add(self)
        else:
            if self._response_streaming:
                self._responses = asyncio.Queue()
            self._start_on_task()

    # --- grpc.aio's call interface ---

    def __await__(self) -> Generator[Any, None, Any]:
        # Not a generator itself: the driver's own iterator is handed to the awaiter, so no
        # frame of this method sits between the awaiter and the driver at every resume.
        if self._outcome is None and self._task is None and self._owner is None:  # not running
            owner = asyncio.current_task(self._core.loop)  # the loop given: no getpid() call
            if owner is not None:  # the usual case: run on the awaiter's task
                self._kick = False
                self._owner = owner
                return self._run().__await__()
            self._start_on_task()
        return self._awaited().__await__()

    async def _awaited(self) -> Any:
        """The call's response once it ended on a task of its own; raises its error."""
        await self._ended()
        return self._result()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        while True:
            message = await self.read()
            if message is grpc.aio.EOF:
                return
            yield message

    async def read(self) -> Any:
        """The next response message, or ``grpc.aio.EOF`` after the last."""
        responses = self._responses
        assert responses is not None, "read() of a call without a response stream"
        message = await responses.get()
        responses.task_done()
        if message is _END:
            responses.put_nowait(_END)
            await self._ended()
            self._result()  # raises the call's error
            return grpc.aio.EOF
        return message

    async def write(self, request: Any) -> None:
        """Send one request message (a call made without a request iterator): return once an
        attempt has sent it; it is kept for the call's retries until the call commits. A call
        that ended raises its error (`CancelledError` if cancelled), as grpc.aio's does."""
        requests = await self._writable()
        if self._outcome is not None:
            self._raise_failure()
            raise asyncio.InvalidStateError("RPC already finished.")
        if requests is None:  # one attempt: its grpc.aio call takes the message
            await self._pass_through(self._current.write(request))
            return
        await requests.write(request)
        self._raise_failure()

    async def done_writing(self) -> None:
        """No more request messages: return once an attempt has half-closed; a call that
        ended with an error raises it."""
        requests = await self._writable()
        if requests is None and self._outcome is None:
            await self._pass_through(self._current.done_writing())
            return
        if requests is not None:
            await requests.done_writing()
        self._raise_failure()

    async def _writable(self) -> RequestStream | None:
        """The call's kept messages once its first attempt was sent or it ended (None: the
        call is allowed one attempt, whose grpc.aio call takes the messages)."""
        if not self._request_streaming:
            raise grpc.aio.UsageError("write() of a call without a request stream")
        if not self._started:
            await self._wait_started()
        return self._requests

    async def _pass_through(self, writing: Any) -> None:
        """Wait for a write to the one attempt's grpc.aio call; if that call ended, raise this
        call's error once it ended too."""
        try:
            await writing
        except grpc.aio.AioRpcError:
            await self._ended()
            self._raise_failure()
            raise

    def _raise_failure(self) -> None:
        """Raise the ended call's error (`CancelledError` if cancelled); nothing otherwise."""
        if self._outcome is not None and (self._outcome[1] is not None or self._outcome[2]):
            self._result()

    def cancelled(self) -> bool:
        return self._outcome is not None and self._outcome[2]

    def done(self) -> bool:
        return self._outcome is not None

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self._core.clock())

    def cancel(self) -> bool:
        if self._outcome is not None:
            return False
        return self._interrupt()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        if self._outcome is not None:
            asyncio.get_running_loop().call_soon(callback, self)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    async def initial_metadata(self) -> grpc.aio.Metadata:
        await self._wait_started()
        if self._current is None:
            return grpc.aio.Metadata()
        metadata: grpc.aio.Metadata = await self._current.initial_metadata()
        return metadata

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        await self._ended()
        if self._error is not None:
            return self._error.trailing_metadata() or grpc.aio.Metadata()
        if self._current is None:
            return grpc.aio.Metadata()
        metadata: grpc.aio.Metadata = await self._current.trailing_metadata()
        return metadata

    async def code(self) -> grpc.StatusCode:
        await self._ended()
        if self.cancelled():
            return grpc.StatusCode.CANCELLED
        return self._error.code() if self._error is not None else grpc.StatusCode.OK

    async def details(self) -> str:
        await self._ended()
        if self.cancelled():
            return "Locally cancelled by application!"
        return (self._error.details() or "") if self._error is not None else ""

    async def wait_for_connection(self) -> None:
        await self._wait_started()

    # --- the channel's hooks ---

    def close_by_channel(self) -> None:
        """The channel closes: the call ends CANCELLED (``Channel closed!``)."""
        if self._outcome is None:
            self._closed_by_channel = True
            self._interrupt()

    def ended(self) -> asyncio.Future[None]:
        """A future done once the call has ended."""
        return ended_future(self, self._outcome is not None)

    # --- where the driver runs ---

    def _running(self) -> bool:
        return self._task is not None or self._owner is not None

    def _start_on_task(self) -> None:
        """Run the driver on a task of its own (nobody awaited the call yet, or its kind
        needs one)."""
        self._kick = False
        if self._outcome is None and not self._running():
            self._task = asyncio.ensure_future(self._run())
            self._task.add_done_callback(_retrieve)

    def _interrupt(self) -> bool:
        """End the call from outside: cancel its driver's wait (or end it before it ran)."""
        if self._task is not None:
            return self._task.cancel()
        if self._owner is not None:
            self._cancelled_owner = True
            return self._owner.cancel()
        self._kick = False
        self._set_started()
        if self._responses is not None:
            self._responses.put_nowait(_END)
        if self._closed_by_channel:
            self._end(None, self._failed(CLOSED), False)
        else:
            self._end(None, None, True)
        return True

    def _release_pick(self) -> None:
        """Let go of the pick made as the call was, unused: a complete one is ended (its
        circuit breaking count)."""
        picked, self._picked = self._picked, None
        if isinstance(picked, PickResult) and picked.outcome is PickOutcome.COMPLETE:
            self._core.picker.call_abandoned(picked)  # no outcome: the call never used it

    def _end(self, result: Any, error: BaseException | None, cancelled: bool) -> None:
        self._outcome = (result, error, cancelled)
        if self._picked is not None:  # ended before it used its pick
            self._release_pick()
        if self._requests is not None:
            self._requests.close()
        self._registry.discard(self)
        if self._ended_future is not None and not self._ended_future.done():
            self._ended_future.set_result(None)
        if self._callbacks:
            loop = asyncio.get_running_loop()
            for callback in self._callbacks:
                loop.call_soon(callback, self)
            self._callbacks = None

    def _result(self) -> Any:
        """The ended call's response; raises its error (`CancelledError` if cancelled)."""
        assert self._outcome is not None
        result, error, cancelled = self._outcome
        if cancelled:
            raise asyncio.CancelledError
        if error is not None:
            raise error
        return result

    # --- the driver ---

    async def _run(self) -> Any:
        """Make the call's plan and follow it to the call's end (the plan is made here, not
        in a function of its own: the usual call's driver costs no more calls than this). A
        unary call whose plan would be its one attempt (`ChannelCore.direct`: for a call with
        metadata, also a route no header chooses) sends that attempt without a plan."""
        core = self._core
        try:
            if core.closed:
                raise grpc.aio.UsageError("Channel is closed.")
            config: CallConfig | Status | None = core.config
            if config is None:  # the usual call has its configuration at once
                config = await self._configured()
            if isinstance(config, Status):
                raise self._failed(config)
            direct = None
            metadata = self._metadata
            if not self._request_streaming:  # a unary or server-streaming call
                # `ChannelCore.direct`'s memo
                direct = (core.metadata_directs if metadata else core.directs).get(
                    self._method, _UNKNOWN
                )
                if direct is _UNKNOWN:
                    direct = core.direct(config, self._method, bool(metadata))
            if self._picked is not None and direct != self._picked_in:
                self._release_pick()  # the configuration changed since the call was made
            if direct is not None:  # the usual call: its plan is its one attempt
                deadline = self._deadline
                if self._picked is None:
                    request_hash = core.rng.getrandbits(64)  # the plan's draw
                else:  # drawn, and picked with, as the call was made
                    request_hash = self._request_hash
                if deadline is not None and core.clock() >= deadline:
                    raise self._failed(DEADLINE_EXCEEDED)
                headers = LazyHeaderView(metadata) if metadata else _NO_METADATA_HEADERS
                outcome = await self._try(direct, headers, request_hash, deadline, 1)
                if outcome.code is not Code.OK:
                    raise self._failed(outcome.status)
            else:
                await self._follow(config)
            result = self._response
        except BaseException as error:
            instead = self._interrupted(error)
            if instead is not None:
                raise instead from None
            raise
        finally:
            self._owner = None
            if not self._started:
                self._set_started()
            if self._responses is not None:
                self._responses.put_nowait(_END)
        self._end(result, None, False)
        return result

    async def _follow(self, config: CallConfig) -> None:
        """Make the call's plan and follow it to an OK end (else raise its failure)."""
        core = self._core
        request = self._call_request = CallRequest(
            authority=core.authority, path=self._method, metadata=self._metadata,
            deadline=self._deadline, channel_id=core.channel_id,
        )  # fmt: skip
        now = core.clock()
        plan = self._plan = CallPlan.begin(
            request, config, now=now, rng=core.rng, faults=core.faults
        )
        if not core.retries_enabled:
            self._committed = True  # C-core without its retry filter: every attempt is final
        elif self._request_streaming and plan.max_attempts > 1:
            self._keep_requests()
        step = plan.start(now)
        finish = await follow_plan(plan, step, self._attempt, self._sleep_until, core.clock)
        if finish.status.code is not Code.OK:
            raise self._failed(finish.status)

    def _interrupted(self, error: BaseException) -> BaseException | None:
        """End the call that ``error`` interrupted: what to raise instead (None: ``error``).
        Its response messages not yet read are lost, as grpc.aio's are once a call failed or
        was cancelled."""
        if self._responses is not None:
            _drop_unread(self._responses)
        if self._plan is not None and self._plan.state is not CallState.DONE:
            self._plan.cancel()
        if not isinstance(error, asyncio.CancelledError):
            self._end(None, error, False)
            return None
        if self._cancelled_owner and self._owner is not None:
            self._cancelled_owner = False
            self._owner.uncancel()  # it was the call's cancellation, not the task's
        if self._closed_by_channel:
            closed = self._failed(CLOSED)
            self._end(None, closed, False)
            return closed
        self._end(None, None, True)
        return None

    async def _configured(self) -> CallConfig | Status:
        """The channel's call configuration, waited for (its first calls)."""
        core = self._core
        await core.start()
        return await core.call_config(self._deadline, self._wait_for_ready)

    def _keep_requests(self) -> None:
        """The call may be retried: read its messages into a `RequestStream` for replay."""
        buffer = RetryBuffer(
            self._core.retry_buffer_size, metadata_size(self._method, self._metadata)
        )
        self._requests = RequestStream(
            self._request, self._serializer, buffer, lambda _: self.cancel()
        )

    async def _sleep_until(self, until: float) -> None:
        core = self._core
        while core.clock() < until:
            if core.closed:
                raise self._failed(CLOSED)
            await core.wait_change(core.changed(), until)

    def _attempt_done(self, outcome: AttemptOutcome) -> Step:
        """The plan's next step after an attempt ended with ``outcome`` (committed when the
        call is)."""
        if self._committed and not outcome.committed:
            outcome = attrs.evolve(outcome, committed=True)
        plan = self._plan
        assert plan is not None
        return plan.attempt_done(outcome, self._core.clock())

    async def _attempt(self, step: Attempt) -> Step:
        """Run attempt ``step`` (`_try`): the plan's next step."""
        headers = self._call_request.headers if self._metadata else _NO_METADATA_HEADERS
        outcome = await self._try(
            step.cluster, headers, step.request_hash, step.deadline, step.number
        )
        return self._attempt_done(outcome)

    async def _try(
        self,
        cluster: str,
        headers: Mapping[str, str],
        request_hash: int,
        deadline: float | None,
        number: int,
    ) -> AttemptOutcome:
        """Pick in ``cluster`` for a call with ``headers`` (waiting while the pick queues),
        then send attempt ``number`` on the pick's connection and tell the picker, the
        connections and the load reporter how it went: its outcome."""
        core = self._core
        picked = self._picked
        if picked is None:
            picked = core.pick_now(cluster, headers, request_hash, deadline, self._wait_for_ready)
        else:  # the pick made as the call was (`unary_call`)
            self._picked = None
        if isinstance(picked, PickWait):  # it queues (or fails a wait-for-ready call)
            picked = await core.wait_pick(picked)
        if isinstance(picked, Status):
            if picked is CLOSED:
                raise self._failed(CLOSED)
            return AttemptOutcome(code=picked.code, details=picked.details)
        if picked.outcome is PickOutcome.DROP:
            raise self._failed(self._dropped(picked))
        endpoint = picked.endpoint
        assert endpoint is not None
        try:  # `ChannelCore.connect`, inline
            policy = core.security.policy_of_cluster(picked.cluster)
            connection = core.connections.connect((endpoint.address, endpoint.port), policy)
        except TlsError as error:  # the pick counted a call (circuit breaking): end it
            core.picker.call_finished(picked, False, core.clock())
            return AttemptOutcome(code=Code.UNAVAILABLE, details=f"{picked.cluster}: {error}")
        connections = core.connections
        if not connections.still_ready(connection):  # closed, not yet told: pick again (C-core)
            core.picker.call_abandoned(picked)  # unused: no outcome, as C-core re-queues it
            return await self._try(cluster, headers, request_hash, deadline, number)
        try:
            load = core.load_of(picked.cluster)
        except BaseException:
            core.picker.call_abandoned(picked)  # unused: no outcome
            raise
        connection.calls += 1  # `Connections.call_started`, inline
        locality = picked.locality
        taken = 0
        if load is not None and locality is not None:
            load.call_started(locality)
            taken = load.taken
        ok = False
        sent = True  # False: gRPC refused it, or it could not be made (no outcome, as C-core)
        self._load_report = None
        started = core.clock()
        call = None
        try:
            call = self._send(connection.channel, number, deadline, started)
            if self._request_streaming or self._response_streaming:
                outcome = await self._exchange_streams(call, deadline)
            else:  # the usual call, awaited here: no coroutine of its own
                try:
                    self._response = await call
                except grpc.aio.AioRpcError as error:
                    outcome = self._unary_failed(error)
                except asyncio.CancelledError:
                    call.cancel()
                    raise
                else:
                    self._error = None
                    if picked.cluster not in core.quiet:  # someone reads its ORCA report
                        self._load_report = load_report_of(await call.trailing_metadata())
                    outcome = _OK
            ok = outcome.code is Code.OK
            if not ok and outcome.code is Code.INTERNAL and self._error is not None:
                # C-core's own refusal of the metadata (a stream's): never sent, never picked
                failed = self._error
                sent = not refused_by_core(failed.details(), failed.debug_error_string())
        except Exception:  # not grpc.aio's answer: the call never went out if it has no status
            sent = _went_out(call)
            raise
        finally:
            if sent:
                now = core.clock()
                report = self._load_report
                core.picker.call_finished(
                    picked, ok, now, elapsed=now - started, load_report=report
                )
                if load is not None and locality is not None:
                    load.call_finished(locality, ok, named_metrics(report))
            else:  # C-core refuses it before any pick: the pick handed back, nothing counted
                core.picker.call_abandoned(picked)
                if load is not None and locality is not None:
                    load.call_not_sent(locality, taken)
            if connection.held:  # `Connections.call_ended`, inline: a held one stays open
                connection.calls -= 1
            else:
                connections.call_ended(connection)
        return outcome

    def _dropped(self, picked: PickResult) -> Status:
        load = self._core.load_of(picked.cluster)
        if load is not None:
            load.call_dropped(picked.drop_category or None)
        if picked.drop_category:
            return Status(
                code=Code.UNAVAILABLE, details=f"EDS-configured drop: {picked.drop_category}"
            )
        return Status(code=Code.UNAVAILABLE, details="circuit breaker drop")

    def _send(
        self, channel: grpc.aio.Channel, number: int, deadline: float | None, now: float
    ) -> Any:
        """Send attempt ``number`` on the endpoint's ``channel`` at ``now``: its grpc.aio call
        (a unary call's trailers are read only when the picker or the load reporter reads
        their ORCA report, or when it failed: they come with its error)."""
        metadata = self._metadata
        if number > 1:  # `Attempt.previous_attempts`, inline
            metadata = (*metadata, (_PREVIOUS, str(number - 1)))
        timeout = None if deadline is None else max(0.0, deadline - now)
        cache = self._multicallables
        requests = self._requests
        key = channel if requests is None else (channel, _BYTES)
        multicallable = cache.get(key)
        if multicallable is None:
            if len(cache) >= _ENDPOINTS_KEPT:
                cache.clear()  # the channels of closed connections are not held for long
            multicallable = cache[key] = self._core.multicallable(
                channel,
                (self._method, *self._kind, self._registered),
                self._serializer if requests is None else None,  # a stream sends bytes
                self._deserializer,
            )
        call = multicallable(
            self._request if requests is None else None,
            timeout=timeout,
            metadata=metadata,
            credentials=self._credentials,
            wait_for_ready=False,
            compression=self._compression,
        )
        self._current = call
        if not self._started:  # `_set_started`, inline
            self._started = True
            if self._started_event is not None:
                self._started_event.set()
        return call

    def _unary_failed(self, error: grpc.aio.AioRpcError) -> AttemptOutcome:
        """A unary attempt ended with ``error``: its outcome, committed when the server's
        headers (with metadata) reached the call."""
        self._error = error
        self._load_report = load_report_of(error.trailing_metadata())
        return outcome_of(error, committed=self._committed or bool(error.initial_metadata()))

    async def _exchange_streams(self, call: Any, deadline: float | None) -> AttemptOutcome:
        """The attempt ``call`` of a streaming call: its requests sent by the call's
        `RequestStream` (kept ones first) while its responses are read, each once the caller
        took the one before (as grpc.aio reads a message when asked); committed by a response
        message or headers with metadata, or by the request buffer's limit. A message still
        unread at the attempt's ``deadline`` ends it then (`_expired`)."""
        requests = self._requests
        sending = None
        statuses = None
        if requests is not None:
            statuses = CallStatuses(call)  # our writes may fail as the server ends the call
            sending = asyncio.ensure_future(requests.send(call))
            sending.add_done_callback(_retrieve)
        timer = None
        try:
            responses = self._responses
            if responses is not None:
                expiry = _Expiry(responses)
                if deadline is not None:
                    delay = max(0.0, deadline - self._core.clock())
                    timer = asyncio.get_running_loop().call_later(delay, expiry.expire)
                async for message in call:
                    self._commit()
                    if expiry.passed:  # it came after the deadline: gRPC's stream ended
                        return await self._expired(call)
                    responses.put_nowait(message)
                    await responses.join()
                    if expiry.expired:
                        return await self._expired(call)
            else:
                self._response = await call
        except grpc.aio.AioRpcError as error:
            self._error = error
            self._load_report = load_report_of(error.trailing_metadata())
            if error.initial_metadata():
                self._commit()  # the server's headers reached the call
            committed = self._committed or (requests is not None and requests.buffer.committed)
            outcome = outcome_of(error, committed=committed)
            if statuses is not None and (outcome.code.name, outcome.details) == LOCAL_WRITE_FAILURE:
                # gRPC's own status for a write the ending call refused: the server's instead
                code, details = await statuses.server_status(LOCAL_WRITE_FAILURE)
                outcome = attrs.evolve(outcome, code=Code[code], details=details)
            return outcome
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if sending is not None:
                sending.cancel()
            if requests is not None:
                requests.buffer.attempt_ended()
        self._error = None
        self._load_report = load_report_of(await call.trailing_metadata())
        return _OK

    async def _expired(self, call: Any) -> AttemptOutcome:
        """The attempt's deadline passed with a response message unread: gRPC ends such a
        stream then, whatever the server sent after it (its messages and status are given
        only as they are read), and its unread messages are lost. Its outcome: the attempt's
        own DEADLINE_EXCEEDED if gRPC's timer ended it first, else C-core's words for it."""
        if not call.done():
            call.cancel()
        code = await call.code()
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            status = Status(code=Code.DEADLINE_EXCEEDED, details=await call.details() or "")
        else:
            status = _UNREAD_AT_DEADLINE
        self._error = rpc_error(status)
        self._load_report = None
        return AttemptOutcome(code=status.code, details=status.details, committed=True)

    def _commit(self) -> None:
        """A response reached the call: this attempt is its last."""
        if not self._committed:
            self._committed = True
            if self._requests is not None:
                self._requests.buffer.commit()

    def _failed(self, status: Status) -> grpc.aio.AioRpcError:
        error = self._error
        if (
            error is not None
            and error.code().value[0] == status.code
            and (error.details() or "") == status.details
        ):
            return error
        self._error = rpc_error(status)
        return self._error

    def _set_started(self) -> None:
        self._started = True
        if self._started_event is not None:
            self._started_event.set()

    async def _wait_started(self) -> None:
        if self._started:
            return
        if self._outcome is None and not self._running() and self._kick:
            self._start_on_task()  # asked before its first turn: it starts now
        if self._started_event is None:
            self._started_event = asyncio.Event()
        await self._started_event.wait()

    async def _ended(self) -> None:
        if self._outcome is None:
            if not self._running():
                self._start_on_task()
            await asyncio.shield(self.ended())


class Ending(Protocol):
    """A call of the channel's (`XdsCall`, or a direct one) as `ended_future` sees it."""

    #: the future `ended_future` made for it (None until one was asked for)
    _ended_future: asyncio.Future[None] | None


def ended_future(call: Ending, done: bool) -> asyncio.Future[None]:
    """A future done once ``call`` has ended (``done``: it has), made at the first ask and
    kept on it (its end sets it)."""
    future = call._ended_future
    if future is None:
        future = call._ended_future = asyncio.get_running_loop().create_future()
        if done:
            future.set_result(None)
    return future


def _went_out(call: Any) -> bool:
    """Whether grpc.aio's ``call``, whose use raised an error of no gRPC status, was sent:
    False when it was never made (None) or gRPC refused it (metadata C-core rejects, a request
    that is not bytes: it raises before the call has a status, which is then cancelled)."""
    if call is None:
        return False
    if call.done():
        return True
    call.cancel()
    return False


class _Expiry:
    """An attempt's deadline timer for its response stream: once the deadline passes, the
    stream's unread messages are dropped (which wakes the driver waiting for the caller to
    take them) and the attempt has expired; with none unread, gRPC's own deadline ends the
    attempt's call, unless it was read to its end."""

    __slots__ = ("expired", "passed", "responses")

    def __init__(self, responses: asyncio.Queue[Any]) -> None:
        self.responses = responses
        #: whether the deadline passed
        self.passed = False
        #: whether it passed with a message unread
        self.expired = False

    def expire(self) -> None:
        self.passed = True
        if self.responses.qsize():
            self.expired = True
            _drop_unread(self.responses)


def _drop_unread(responses: asyncio.Queue[Any]) -> None:
    """Take every message still queued for the caller (a call that failed loses them, as
    grpc.aio's does), so that nobody waits for them to be read."""
    while not responses.empty():
        responses.get_nowait()
        responses.task_done()


def _retrieve(task: asyncio.Task[Any]) -> None:
    """The driver's error is the call's, given through the call: never unretrieved."""
    if not task.cancelled():
        task.exception()


class Starter:
    """Starts on a task, at the loop's next turn, the unary calls made in this turn that nobody
    awaited by then: one callback per turn for all of a channel's calls, not one per call.

    The loop is the channel's (`ChannelCore.loop`, that of its first call, as a grpc.aio
    channel keeps the loop it was made on): asking asyncio for the running loop costs a
    ``getpid()`` system call each time."""

    __slots__ = ("_calls", "_handle")

    def __init__(self) -> None:
        self._calls: list[XdsCall] = []
        self._handle: asyncio.Handle | None = None

    def add(self, call: XdsCall) -> None:
        """Start ``call`` at the next turn unless it runs or ended by then."""
        self._calls.append(call)
        if self._handle is None:
            core = call._core
            loop = core.loop
            if loop is None:
                loop = core.loop = asyncio.get_running_loop()
            self._handle = loop.call_soon(self._start)

    def _start(self) -> None:
        calls, self._calls, self._handle = self._calls, [], None
        for call in calls:
            if call._kick:
                call._start_on_task()
