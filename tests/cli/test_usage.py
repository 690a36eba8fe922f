"""Command lines that cannot mean anything are usage errors: one line on stderr, exit 2,
before anything connects."""

from __future__ import annotations

import pytest

from tests.cli.helpers import cli, one_error_line

SERVER = ["--server", "127.0.0.1:1"]  # never reached: usage is checked first


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["watch", "cluster", "c", *SERVER, "--count", "0"], "--count: '0': must be above 0"),
        (["watch", "cluster", "c", *SERVER, "--count", "-3"], "--count: '-3': must be above 0"),
        (["watch", "cluster", "c", *SERVER, "--count", "x"], "--count: 'x' is not a whole number"),
        (["watch", "cluster", "c", *SERVER, "--timeout", "0"], "--timeout: '0': must be above 0"),
        (["watch", "cluster", "c", *SERVER, "--timeout", "-1"], "--timeout: '-1': must be above 0"),
        (["watch", "cluster", "c", *SERVER, "--timeout", "nan"], "--timeout: 'nan': must be above"),
        (["dump", "--listener", "l", *SERVER, "--timeout", "0"], "--timeout: '0': must be above 0"),
        (["dump", "--listener", "l", *SERVER, "--timeout", "-2.5"], "'-2.5': must be above 0"),
        (["demo", "--updates", "0"], "--updates: '0': must be above 0"),
        (["serve", "--port", "-1"], "--port: '-1' is not a port (0-65535)"),
    ],
)
async def test_counts_and_timeouts_must_be_above_zero(args: list[str], message: str) -> None:
    """A zero, negative or unreadable count, timeout or port is a usage error (exit 2)."""
    status, out, err = await cli(*args)
    assert status == 2
    assert out == ""
    assert message in one_error_line(err)


@pytest.mark.parametrize("source", [["--rest", "http://127.0.0.1:1"], ["--file", "cds.yaml"]])
@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--delta", "--delta: {kind} has no Delta xDS (it is gRPC only)"),
        ("--no-ads", "--no-ads: {kind} has no xDS streams to aggregate (gRPC only)"),
    ],
)
async def test_stream_variants_with_rest_or_files_are_usage_errors(
    source: list[str], flag: str, message: str
) -> None:
    """``--delta`` or ``--no-ads`` with ``--rest`` or ``--file`` is refused, not ignored."""
    kind = "REST" if source[0] == "--rest" else "a file source"
    status, _, err = await cli("dump", "--listener", "l", *source, flag)
    assert status == 2
    assert one_error_line(err) == f"xdsclient: {message.format(kind=kind)}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["watch", *SERVER], "watch needs TYPE NAME... or --listener NAME"),
        (["watch", "cluster", "c", "--listener", "l", *SERVER], "not both"),
        (["watch", "thing", "x", *SERVER], "unknown type 'thing'"),
        (["watch", "type.googleapis.com/x.Y", "n", *SERVER], "unknown type 'type.googleapis"),
        (["dump", *SERVER], "dump needs --listener NAME or --resource TYPE:NAME"),
        (["dump", "--resource", "cluster", *SERVER], "--resource 'cluster': expected TYPE:NAME"),
        (["watch", "cluster", "c"], "one of the arguments --server --bootstrap --file --rest"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: command"),
    ],
)
async def test_argument_mistakes_are_one_line(args: list[str], message: str) -> None:
    """A missing, unknown or conflicting argument is one ``xdsclient:`` line and exit 2."""
    status, _, err = await cli(*args)
    assert status == 2
    line = one_error_line(err)
    assert message in line
    assert err == line + "\n"  # no usage block: one line is the whole message


V2_CLUSTER = "type.googleapis.com/envoy.api.v2.Cluster"
V3_CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"


@pytest.mark.parametrize(
    ("args", "given"),
    [
        (["watch", V2_CLUSTER, "c", *SERVER], V2_CLUSTER),
        (["dump", "--resource", f"{V2_CLUSTER}:c", *SERVER], V2_CLUSTER),
        (["check", "--resource", f"{V2_CLUSTER}:c", *SERVER], V2_CLUSTER),
        (["watch", "envoy.api.v2.Cluster", "c", *SERVER], "envoy.api.v2.Cluster"),
    ],
)
async def test_an_xds_v2_type_is_a_usage_error_naming_its_v3_url(
    args: list[str], given: str
) -> None:
    """A v2 type URL (or message name) is not "unknown": one line saying v2 was removed and
    which v3 URL to use, exit 2 like any type the CLI does not take."""
    status, _, err = await cli(*args)
    assert status == 2
    assert (
        err == f"xdsclient: {given} is an xDS v2 type, and xDS v2 was removed: use {V3_CLUSTER}\n"
    )
