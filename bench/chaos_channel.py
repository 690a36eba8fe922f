"""Chaos for `XdsChannel`: a call every 10 ms for a minute while the control plane is killed,
restarted, cut off, stalled, NACKed, failed over to a second server (gRFC A71) and the
endpoints come and go; `xdsclient.testing._chaos_channel` says exactly what each fault does.

Prints one table, a row per kind of fault: how many times it ran, the calls that started
while it lasted and how many of them failed (the verdict: none, since a HEALTHY endpoint is
always assigned and every backend stays up), then the calls in all, the calls made through the
fallback server by channels opened while the primary was down, and the steady calls' latency.
The suite runs the same driver for a few seconds.

    python bench/chaos_channel.py [--seconds 60] [--seed 1] [--interval 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from xdsclient.testing._chaos_channel import run_channel_chaos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--interval", type=float, default=0.01)
    args = parser.parse_args()
    report = asyncio.run(
        run_channel_chaos(seconds=args.seconds, seed=args.seed, interval=args.interval)
    )
    print(f"{report.seconds:.0f} s, a call every {args.interval * 1000:.0f} ms\n")
    print("| fault | times | calls during it | failed | slowest call (ms) |")
    print("|---|---:|---:|---:|---:|")
    for row in report.rows:
        label = "(between faults)" if row.fault == "-" else row.fault
        print(
            f"| {label} | {row.times or ''} | {row.calls} | {row.failed} "
            f"| {row.slowest * 1e3:.0f} |"
        )
    print(f"| **all** | | {report.calls} | {len(report.failures)} | {report.slowest * 1e3:.0f} |")
    print(
        f"\ncalls through the fallback from new channels: {report.fallback_calls}, "
        f"failed: {report.fallback_failed}; assignments sent: {report.assignments}; "
        f"backends that answered: {report.backends_used}"
    )
    print(
        f"latency: p50 {report.p50 * 1e3:.1f} ms, p99 {report.p99 * 1e3:.1f} ms, "
        f"slowest {report.slowest * 1e3:.0f} ms"
    )
    for failure in report.failures[:10]:
        print("failed:", *failure)
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
