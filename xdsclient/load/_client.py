"""One simulated client: a real xDS client on its own stream(s), without what a load generator
does not need.

Why drive the sans-I/O `Session` directly: it already decides everything a correct client
must (ACK and NACK with the right version and nonce, per-resource NACKs, versions across
reconnects, Delta's ``initial_resource_versions``, does-not-exist and TTL timers), so each
simulated client is exactly as correct as `XdsClient`, and costs one light task per stream
instead of a client's dispatcher, watchers and views. Resources are decoded by the run's
`SharedDecoder` (once per distinct body for the whole fleet); the walk reads the names each
`Lean` value leads to.

A client's life: dial (its own channel and TCP connection, unless the run shares one), open
its stream (ADS) or one per type, answer every response (ACK/NACK, then subscribe what the
walk now needs, in the same request), reconnect after a stream ends (failures counted by the
gRPC status the server sent), and stop when the run ends or churn makes it leave. Faults change
what it answers and when it drops its streams (`Faults`).

Why its own loop and not `StreamDriver`: the driver waits on several futures a turn (a wake
event, the read, the next deadline); at 5,000 streams it holds 5 KB a stream more than a bare
loop and takes 1.4 to 1.9 times its CPU a response (`bench/stream_loops.py`), against a budget
of 64 KB a client of which 57 are used (`bench/load.py`). The rules of a stream's life (when
requests and their timers start, when to back off, which status counts) are the driver's all
the same: both ask `StreamLife`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from .. import Backoff, NodeConfig, resources
from .._call_status import CallStatuses
from .._errors import ResourceDecodeError
from .._protocol import DataError, ResourceChanged, Session
from .._protocol._messages import DeltaDiscoveryResponse, DiscoveryResponse
from .._protocol._services import ADS_SERVICE, PER_TYPE_SERVICES, method_path
from .._shell._stream_life import End, StreamLife
from ._fleet import Fleet
from ._lean import CLUSTER, ENDPOINT, KINDS, LISTENER, ROUTE, Lean
from ._results import ClientResult
from ._scenario import Faults, Scenario

__all__ = ["SimClient", "channel_options"]

_WALK_TYPES = (LISTENER, ROUTE, CLUSTER, ENDPOINT)
_FULL_STATE = frozenset({LISTENER, CLUSTER})
_CANONICAL = {t: t for t in _WALK_TYPES}
_distinct = itertools.count()


def channel_options(share: bool) -> list[tuple[str, Any]]:
    """Channel arguments: a local subchannel pool and a distinct argument per channel, so two
    channels to one server never share a TCP connection (unless ``share``).

    gRPC's retries are off: a client counts and retries its own streams (a refused stream is
    an error the run reports, not one gRPC hides), and the retry state gRPC keeps for every
    call is 6 KB a stream (measured on 3,000 streams: 29 KB each with it, 23 KB without).
    """
    options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
                                      ("grpc.enable_retries", 0)]  # fmt: skip
    if not share:
        options += [("grpc.use_local_subchannel_pool", 1),
                    ("grpc.xdsclient_load_channel", next(_distinct))]  # fmt: skip
    return options


class _Faults:
    """The faults of one client: every `Faults` group that applies to it, combined."""

    def __init__(self, groups: Sequence[Faults], rng: Callable[[], random.Random]) -> None:
        self._rng = rng
        everies = [g.nack_every for g in groups if g.nack_every is not None]
        self.nack_every = min(everies) if everies else None
        self.nack_share = max((g.nack_share for g in groups), default=0.0)
        self.nack_names = frozenset(name for g in groups for name in g.nack_names)
        self.slow_ack = max((g.slow_ack for g in groups), default=0.0)
        resets = [g.reset_every for g in groups if g.reset_every is not None]
        self.reset_every = min(resets) if resets else None
        self.forgetful = any(g.forgetful for g in groups)
        churns = [g.churn_every for g in groups if g.churn_every is not None]
        self.churn_every = min(churns) if churns else None
        self.responses = 0

    @property
    def rejects(self) -> bool:
        """Whether this client ever NACKs on purpose (its decoding is then not reused)."""
        return bool(self.nack_every or self.nack_share or self.nack_names)

    def nack_this(self) -> bool:
        """Whether to NACK the response just read (counts it)."""
        self.responses += 1
        if self.nack_every is not None and self.responses % self.nack_every == 0:
            return True
        return bool(self.nack_share) and self._rng().random() < self.nack_share


class _Stream:
    """One stream of a client: its session, its call, the rules of its life (shared with
    `XdsClient`'s driver), and a lock so writes never interleave."""

    def __init__(self, session: Session, method: str, life: StreamLife) -> None:
        self.session = session
        self.method = method
        self.life = life
        self.call: Any = None
        self.lock = asyncio.Lock()
        self.opened = 0
        self.resetting = False
        #: a write failed: the call ended (its read tells how); write nothing more on it
        self.write_failed = False
        self.timer: asyncio.TimerHandle | None = None


class SimClient:
    """A simulated xDS client; `run` it as a task, cancel the task to stop it."""

    def __init__(
        self,
        index: int,
        scenario: Scenario,
        fleet: Fleet,
        *,
        target: str,
        node: NodeConfig,
        shared_channel: grpc.aio.Channel | None = None,
    ) -> None:
        self.index = index
        self._scenario = scenario
        self._fleet = fleet
        self._target = target
        self._channel = shared_channel
        self._own_channel = shared_channel is None
        self._seed = f"{scenario.seed}:{index}"
        self._random: random.Random | None = None  # made on first use: 2.5 KB a client
        self._faults = _Faults([f for f in scenario.faults if f.applies_to(index)], self._rng)
        self.result = ClientResult(index=index, node_id=node.id)
        self._node = node.to_proto()
        self._nack_all = False
        self._values: dict[str, dict[str, Lean]] = {t: {} for t in _WALK_TYPES}
        #: what each type's walk wants now (interned by the fleet: clients of one scenario
        #: mostly want the same names, held once)
        self._wanted: dict[str, frozenset[str]] = dict.fromkeys(_WALK_TYPES, frozenset())
        self._answered: set[str] = set()
        self._streams = self._new_streams()
        self._complete = False
        self._open = 0
        self._counted = False
        self._start = 0.0
        self._redial: asyncio.Event | None = asyncio.Event() if self._own_channel else None
        self._tasks: set[asyncio.Task[None]] = set()
        #: the client left by churn (the run starts another in its place)
        self.churned = False

    # ------------------------------------------------------------------ set-up

    def _rng(self) -> random.Random:
        """This client's random numbers (faults, jitter), seeded by the run's seed and its
        number; most clients of a run without faults or errors never need one."""
        if self._random is None:
            self._random = random.Random(self._seed)
        return self._random

    def _types(self) -> list[resources.ResourceType[Any]]:
        """The walk's resource types, reading through the run's decoder: one list for every
        client that does not NACK on purpose (the same values, built once)."""
        if not self._faults.rejects and self._fleet.resource_types is not None:
            return self._fleet.resource_types
        decoder = self._fleet.decoder
        types = []
        for type_url in _WALK_TYPES:
            decode = decoder.decoder(type_url)
            if self._faults.rejects:
                decode = self._faulty(decode)
            types.append(resources.ResourceType(
                type_url=type_url, decode=decode, decode_is_pure=not self._faults.rejects,
                all_resources_required_in_sotw=type_url in _FULL_STATE))  # fmt: skip
        if not self._faults.rejects:
            self._fleet.resource_types = types
        return types

    def _faulty(self, decode: Any) -> Any:
        names = self._faults.nack_names

        def faulty(data: bytes) -> tuple[str, Lean]:
            name, value = decode(data)
            if self._nack_all:
                raise ResourceDecodeError("load fault: NACK this response", name=name)
            if name in names:
                raise ResourceDecodeError("load fault: NACK this resource", name=name)
            return name, value

        return faulty

    def _new_streams(self) -> list[_Stream]:
        scenario = self._scenario
        types = self._types()
        backoff = Backoff(initial=scenario.backoff_initial, maximum=scenario.backoff_max)
        if scenario.ads:
            session = Session(node=self._node, resource_types=types, delta=scenario.delta)
            return [_Stream(session, method_path(ADS_SERVICE, delta=scenario.delta),
                            StreamLife(backoff))]  # fmt: skip
        return [
            _Stream(Session(node=self._node, resource_types=[rtype], delta=scenario.delta),
                    method_path(PER_TYPE_SERVICES[rtype.type_url], delta=scenario.delta),
                    StreamLife(backoff))
            for rtype in types
        ]  # fmt: skip

    def _stream_of(self, type_url: str) -> _Stream:
        if len(self._streams) == 1:
            return self._streams[0]
        return self._streams[_WALK_TYPES.index(type_url)]

    @property
    def streams_opened(self) -> int:
        """Streams this client has opened (every attempt counts)."""
        return sum(stream.opened for stream in self._streams)

    def next_deadline(self) -> float | None:
        """The earliest deadline of its sessions (does-not-exist and TTL timers), or None."""
        deadlines = [d for s in self._streams if (d := s.session.next_deadline()) is not None]
        return min(deadlines, default=None)

    # ------------------------------------------------------------------ life

    async def run(self, lifetime: float | None = None) -> None:
        """Dial, then keep the streams going until cancelled (or ``lifetime`` seconds, churn)."""
        fleet = self._fleet
        self._start = fleet.time()
        self._walk()
        churn = self._faults.churn_every
        if churn is not None and lifetime is None:
            lifetime = self._rng().expovariate(1 / churn)
        try:
            async with asyncio.timeout(lifetime):
                if self._redial is None:
                    await self._serve_shared()
                else:
                    await self._serve_own(self._redial)
        except TimeoutError:
            self.churned = True
        finally:
            await self._close()

    async def _serve_shared(self) -> None:
        """On the run's shared channel: the streams run until cancelled (one stream runs in
        this task: at 5,000 clients a task and its bookkeeping more each is 1 KB a client)."""
        if len(self._streams) == 1:
            await self._stream_loop(self._streams[0])
        else:
            await asyncio.gather(*(self._stream_loop(s) for s in self._streams))

    async def _serve_own(self, redial: asyncio.Event) -> None:
        """On its own channel: dial, run the streams, and dial again when a storm asks."""
        await self._dial(first=True)
        while True:
            tasks = [asyncio.create_task(self._stream_loop(s)) for s in self._streams]
            try:
                await redial.wait()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            redial.clear()
            await self._dial(first=False)

    async def _dial(self, *, first: bool) -> None:
        if not self._own_channel:
            return
        if self._channel is not None:
            await self._channel.close()
        started = self._fleet.time()
        self._channel = grpc.aio.insecure_channel(
            self._target, options=channel_options(self._scenario.share_connections)
        )
        await self._channel.channel_ready()
        seconds = self._fleet.time() - started
        self._fleet.connected(seconds)
        if first:
            self.result.connect = seconds

    async def _close(self) -> None:
        for stream in self._streams:
            if stream.timer is not None:
                stream.timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._complete:
            self._complete = False
            self._fleet.complete_now -= 1
        if self._own_channel and self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()

    def storm(self) -> None:
        """Drop the connection and every stream now, and reconnect at once."""
        if self._redial is not None:
            self._redial.set()
        else:
            for stream in self._streams:
                self._reset(stream)

    def _reset(self, stream: _Stream) -> None:
        if stream.call is not None and not stream.resetting:
            stream.resetting = True
            stream.call.cancel()

    # ------------------------------------------------------------------ one stream

    async def _stream_loop(self, stream: _Stream) -> None:
        """Streams one after another, as `StreamLife` rules: at once after a stream that
        answered (or that we reset), after the backoff otherwise, OK and no response included."""
        clock = self._fleet.clock
        while True:
            status, how = await self._stream_once(stream)
            verdict = stream.life.ended(how, self._uniform)
            if status is not None and status != "OK":
                self._fleet.error(status)
                self.result.errors += 1
                if status == "UNIMPLEMENTED":
                    self._fleet.not_served(f"{self._target} does not serve {stream.method} "
                                           "(UNIMPLEMENTED): nothing to load")  # fmt: skip
            if verdict.delay:
                await clock.sleep_until(clock.time() + verdict.delay)

    def _uniform(self) -> float:
        return self._rng().random()

    async def _stream_once(self, stream: _Stream) -> tuple[str | None, End]:
        """Open the stream, serve it until it ends: (the gRPC status name it ended with, None
        when it ended without one, and how it ended).

        Every status the call reports is kept (`CallStatuses`): when the server ends the stream
        just as an ACK goes out, gRPC fails the write and reports its own INTERNAL ("Internal
        error from Core") over the server's status, which is the one counted (`stream_status`).
        """
        assert self._channel is not None
        fleet = self._fleet
        if self._faults.forgetful and stream.opened:
            self._forget(stream)
        call: Any = self._channel.stream_stream(stream.method)()
        statuses = CallStatuses(call)
        stream.call = call
        stream.opened += 1
        stream.life.opening()
        stream.session.connect(fleet.time())
        self._stream_opened()
        reset = self._schedule_reset(stream)
        response_class = DeltaDiscoveryResponse if self._scenario.delta else DiscoveryResponse
        status: str | None = None
        try:
            await call.wait_for_connection()  # requests, and their timers, from now (A57)
            stream.life.established()
            await self._flush(stream)
            if stream.opened > 1:  # counted once the server has its first request
                self.result.reconnects += 1
                fleet.result.reconnects += 1
            while True:
                raw = await call.read()
                if raw is grpc.aio.EOF:
                    status = "OK"
                    break
                stream.life.received()
                await self._on_response(stream, raw, response_class)
        except grpc.aio.AioRpcError as exc:
            status, _ = await statuses.server_status(fallback=(exc.code().name, ""))
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not stream.resetting or (current is not None and current.cancelling()):
                stream.life.ended(End.OURS, self._uniform)  # a redial or the run's end
                raise
        finally:
            if reset is not None:
                reset.cancel()
            ours = stream.resetting
            stream.session.disconnect(fleet.time())
            stream.call = None
            stream.resetting = False
            stream.write_failed = False
            self._stream_closed()
            call.cancel()
        if ours:
            return None, End.OURS
        return status, End.FAILED

    def _schedule_reset(self, stream: _Stream) -> asyncio.TimerHandle | None:
        every = self._faults.reset_every
        if every is None:
            return None
        delay = self._rng().expovariate(1 / every)
        return asyncio.get_running_loop().call_later(delay, self._reset, stream)

    def _forget(self, stream: _Stream) -> None:
        """A forgetful client reconnects as if new: a fresh session (no versions to offer),
        the same interest."""
        old = stream.session
        stream.session = Session(
            node=self._node,
            resource_types=self._types() if len(self._streams) == 1 else
            [t for t in self._types() if t.type_url == old.type_urls[0]],
            delta=True,
        )  # fmt: skip
        for type_url in old.type_urls:
            self._values[type_url].clear()
            self._wanted[type_url] = frozenset()
            self._answered.discard(type_url)
        self._walk()

    def _stream_opened(self) -> None:
        self._open += 1
        if self._open == 1:
            self._fleet.connected_now += 1
            if not self._counted:  # the first time: the run counts it as connected
                self._counted = True
                self._fleet.result.connected += 1

    def _stream_closed(self) -> None:
        self._open -= 1
        if self._open == 0:
            self._fleet.connected_now -= 1

    # ------------------------------------------------------------------ responses

    async def _on_response(self, stream: _Stream, raw: bytes, response_class: Any) -> None:
        fleet = self._fleet
        read_at = fleet.time()
        response = response_class.FromString(raw)
        type_url = response.type_url
        counts = fleet.counts(type_url)
        counts.received += 1
        counts.received_bytes += len(raw)
        self._nack_all = self._faults.rejects and self._faults.nack_this()
        try:
            events = stream.session.receive(response, read_at)
        finally:
            self._nack_all = False
        first_answer = type_url in self._values and type_url not in self._answered
        if first_answer:
            self._answered.add(_CANONICAL[type_url])  # not the response's copy of the URL
        self._apply(events, fleet.time(), walk=first_answer)
        if self._faults.slow_ack:
            await asyncio.sleep(self._faults.slow_ack)
        await self._flush(stream, answering=(type_url, read_at))
        await self._flush_others(stream)

    def _apply(self, events: list[Any], now: float, *, walk: bool = False) -> None:
        """Keep the values the events bring; walk again only when what the walk reads (the
        names held and the names they lead to) changed, not for an update that keeps both,
        such as every new version of an assignment."""
        fleet = self._fleet
        for event in events:
            table = self._values.get(event.type_url)
            if table is None:
                continue
            if isinstance(event, ResourceChanged):
                old = table.get(event.name)
                if old is not None:
                    fleet.updated(event.type_url, event.value, now)
                walk = walk or old is None or old.refs != event.value.refs
                table[event.name] = event.value
            elif isinstance(event, DataError):
                walk = table.pop(event.name, None) is not None or walk
        if walk:
            self._walk()

    async def _flush(self, stream: _Stream, answering: tuple[str, float] | None = None) -> None:
        """Write what the session owes (ACKs, NACKs, interest), then re-arm its timer.

        ``answering`` is the type URL and read time of the response just read: its ACK latency
        ends as the request of that type (the one carrying the ACK or NACK) is handed to gRPC,
        which sends it on its own threads. Awaiting the write's completion would add the time
        this loop takes to hear of it, which under a burst is the whole burst, while the server
        already has the ACK (docs/load-testing.md, "Performance").
        """
        fleet = self._fleet
        async with stream.lock:
            call = stream.call
            if call is None or not stream.life.may_write or stream.write_failed:
                return
            for request in stream.session.requests_to_send(fleet.time()):
                data = request.SerializeToString()
                counts = fleet.counts(request.type_url)
                counts.sent += 1
                counts.sent_bytes += len(data)
                if request.HasField("error_detail"):
                    counts.nacks += 1
                    self.result.nacks += 1
                    fleet.result.nacks += 1
                if answering is not None and request.type_url == answering[0]:
                    fleet.acked(fleet.time() - answering[1])
                    answering = None
                try:
                    await call.write(data)
                except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    stream.write_failed = True  # the call ended under us: its read says how
                    return
        self._arm(stream)

    async def _flush_others(self, stream: _Stream) -> None:
        for other in self._streams:
            if other is not stream and other.life.may_write:
                await self._flush(other)

    def _arm(self, stream: _Stream) -> None:
        if stream.timer is not None:
            stream.timer.cancel()
            stream.timer = None
        deadline = stream.session.next_deadline()
        if deadline is None:
            return
        delay = max(0.0, deadline - self._fleet.time())
        stream.timer = asyncio.get_running_loop().call_later(delay, self._expire, stream)

    def _expire(self, stream: _Stream) -> None:
        stream.timer = None
        if stream.call is None:
            return
        self._apply(stream.session.expire(self._fleet.time()), self._fleet.time())
        task = asyncio.create_task(self._flush_all())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush_all(self) -> None:
        for stream in self._streams:
            await self._flush(stream)

    # ------------------------------------------------------------------ the walk

    def _walk(self) -> None:
        """What this client needs now, from what it holds; subscribe the difference and note
        its first complete configuration."""
        scenario = self._scenario
        wanted: dict[str, set[str]] = {t: set() for t in _WALK_TYPES}
        if scenario.profile == "resources":
            for kind, name in scenario.resources:
                wanted[KINDS[kind]].add(name)
            follow = False
        elif scenario.profile == "listener":
            assert scenario.listener is not None
            wanted[LISTENER].add(scenario.listener)
            follow = True
        else:
            wanted[LISTENER].add("*")
            wanted[CLUSTER].add("*")
            follow = True
        if follow:
            self._follow(wanted)
        self._subscribe_changes(wanted)
        self._check_complete(wanted)

    def _follow(self, wanted: dict[str, set[str]]) -> None:
        values = self._values
        stack = [(t, n) for t in _WALK_TYPES for n in wanted[t]]
        for type_url in (LISTENER, CLUSTER):  # what a wildcard brought
            if "*" in wanted[type_url]:
                stack.extend((type_url, name) for name in values[type_url])
        while stack:
            type_url, name = stack.pop()
            value = values[type_url].get(name)
            if value is None:
                continue
            for kind, names in value.refs:
                seen = wanted[kind]
                if "*" in seen:  # the wildcard brings them (and they are on the stack)
                    continue
                for ref in names:
                    if ref not in seen:
                        seen.add(ref)
                        stack.append((kind, ref))

    def _subscribe_changes(self, wanted: dict[str, set[str]]) -> None:
        for type_url, names in wanted.items():
            before = self._wanted[type_url]
            if names == before:
                continue
            session = self._stream_of(type_url).session
            for name in names - before:
                session.subscribe(type_url, name)
            for name in before - names:
                session.unsubscribe(type_url, name)
                self._values[type_url].pop(name, None)
            self._wanted[type_url] = self._fleet.intern(names)

    def _check_complete(self, wanted: dict[str, set[str]]) -> None:
        values = self._values
        complete = all(
            (type_url in self._answered) if name == "*" else (name in values[type_url])
            for type_url, names in wanted.items()
            for name in names
        )
        if complete == self._complete:
            return
        self._complete = complete
        fleet = self._fleet
        fleet.complete_now += 1 if complete else -1
        if complete and self.result.first_config is None:
            seconds = fleet.time() - self._start
            self.result.first_config = seconds
            self.result.incomplete = False
            fleet.result.complete += 1
            fleet.first_config(seconds)
