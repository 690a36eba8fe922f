"""The retry buffer of a request-streaming call, without I/O: C-core's limit read from the
channel options, what it counts, when the call commits, and which messages a retry still has."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xdsclient.grpc._requests import (
    DEFAULT_RETRY_BUFFER_SIZE,
    RetryBuffer,
    metadata_size,
    retry_buffer_size,
)


def test_the_limit_is_c_cores_per_rpc_option_clamped_with_its_default() -> None:
    """``grpc.per_rpc_retry_buffer_size`` sets the limit (the last one given), clamped to
    [0, INT_MAX]; without it, or with a value that is not an integer, it is 256 KiB; grpc-js's
    channel-wide ``grpc.retry_buffer_size`` is not C-core's and changes nothing."""
    assert retry_buffer_size(()) == DEFAULT_RETRY_BUFFER_SIZE == 262144
    assert retry_buffer_size([("grpc.per_rpc_retry_buffer_size", 10)]) == 10
    key = "grpc.per_rpc_retry_buffer_size"
    assert retry_buffer_size([(key, 10), (key, 20)]) == 20
    assert retry_buffer_size([(key, -5)]) == 0
    assert retry_buffer_size([(key, 2**40)]) == 2**31 - 1
    assert retry_buffer_size([(key, "10")]) == DEFAULT_RETRY_BUFFER_SIZE
    assert retry_buffer_size([("grpc.retry_buffer_size", 1)]) == DEFAULT_RETRY_BUFFER_SIZE


def test_the_initial_metadata_counts_as_hpack_sizes_it() -> None:
    """``:path`` and each metadata entry count their name, value and 32 bytes."""
    assert metadata_size("/s/m", ()) == 5 + 4 + 32
    assert metadata_size("/s/m", [("k", "vv"), ("k-bin", b"\x00")]) == 41 + 35 + 38


def test_the_call_commits_only_once_the_count_passes_the_limit() -> None:
    """A buffer filled to exactly its limit is not committed; one byte more commits it; a call
    whose metadata alone passes the limit is committed from the start (C-core: ``>``)."""
    buffer = RetryBuffer(100, 40)
    committed = []
    for message in (b"x" * 60, b"y"):
        buffer.add(message)
        committed.append(buffer.committed)
    assert committed == [False, True]
    assert RetryBuffer(39, 40).committed
    assert not RetryBuffer(40, 40).committed


def test_after_the_commit_a_message_is_let_go_once_the_attempt_sent_it() -> None:
    """Once committed, what the attempt in flight has sent is let go and what it has not is
    kept for it; before, every message is kept for the next attempt."""
    buffer = RetryBuffer(10, 0)
    buffer.add(b"a" * 4)
    buffer.add(b"b" * 4)
    buffer.sent(0)
    assert (buffer.get(0), buffer.get(1)) == (b"aaaa", b"bbbb")
    buffer.add(b"c" * 4)  # 12 bytes: committed, "a" was sent and goes
    assert buffer.committed
    assert (buffer.get(1), buffer.get(2)) == (b"bbbb", b"cccc")
    buffer.sent(1)
    assert buffer.get(2) == b"cccc"
    assert len(buffer._kept) == 1


def test_a_commit_between_attempts_keeps_every_message_for_the_next() -> None:
    """The call commits while no attempt is in flight (between a failure and its retry): the
    next attempt still gets every message from the first."""
    buffer = RetryBuffer(10, 0)
    buffer.add(b"a" * 6)
    buffer.sent(0)
    buffer.attempt_ended()
    buffer.add(b"b" * 6)
    assert buffer.committed
    assert (buffer.get(0), buffer.get(1)) == (b"a" * 6, b"b" * 6)


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 8)),
        st.tuples(st.just("send"), st.just(0)),
        st.tuples(st.just("end"), st.just(0)),
        st.tuples(st.just("commit"), st.just(0)),
    ),
    max_size=40,
)


@given(limit=st.integers(0, 30), metadata=st.integers(0, 10), steps=_STEPS)
def test_every_message_a_later_send_needs_is_still_kept(
    limit: int, metadata: int, steps: list[tuple[str, int]]
) -> None:
    """Whatever the order of messages, sends, attempt ends and commits: the attempt in flight
    (or the next, when the call committed between attempts) can still get every message it
    has not sent, a call not committed keeps every message, and the call is committed exactly
    when the bytes passed the limit or it was told to. An attempt that ends committed is the
    call's last."""
    buffer = RetryBuffer(limit, metadata)
    messages: list[bytes] = []
    sent = 0  # messages the attempt in flight has sent
    told = False
    for step, size in steps:
        if step == "add":
            messages.append(bytes([len(messages) % 256]) * size)
            buffer.add(messages[-1])
        elif step == "send" and sent < buffer.count:
            buffer.sent(sent)
            sent += 1
        elif step == "end":
            if buffer.committed:
                return  # the call ends with this attempt
            buffer.attempt_ended()
            sent = 0
        elif step == "commit":
            buffer.commit()
            told = True
        first = sent if buffer.committed else 0
        assert [buffer.get(i) for i in range(first, buffer.count)] == messages[first:]
        assert buffer.committed == (told or metadata + sum(map(len, messages)) > limit)
