"""Chaos for minutes: random faults while the server mutates resources, for each transport variant.

Prints, per variant, the faults injected, the updates sent and received, how long the client
took to converge once the faults stopped, the steps back to an older version that a server
caused (allowed: a primary answering again with an older state than the fallback's, gRFC A71),
and any violation (an update the server never sent, one delivered twice in a row, or a step
back that no server response explains; `xdsclient.testing._chaos` says exactly). The suite runs
the same driver for a few seconds, with one server and with two.

    python bench/chaos.py [--seconds 60] [--resources 20] [--seed 1] [--servers 2]
"""

from __future__ import annotations

import argparse
import asyncio

from xdsclient.testing._chaos import run_chaos

VARIANTS = (
    ("ads-sotw", True, False),
    ("ads-delta", True, True),
    ("xds-sotw", False, False),
    ("xds-delta", False, True),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--resources", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--servers", type=int, choices=(1, 2), default=1, help="2: a fallback server (gRFC A71)"
    )
    args = parser.parse_args()
    header = ("variant", "faults", "sent", "received", "converged", "steps back", "violations")
    print("{:<10} {:>7} {:>6} {:>9} {:>10} {:>10} {:>11}".format(*header))
    for label, ads, delta in VARIANTS:
        report = asyncio.run(
            run_chaos(
                seconds=args.seconds,
                seed=args.seed,
                resources=args.resources,
                ads=ads,
                delta=delta,
                servers=args.servers,
            )
        )
        converged = "never" if report.convergence is None else f"{report.convergence:.2f} s"
        faults = sum(report.faults.values())
        print(
            f"{label:<10} {faults:>7} {report.updates_sent:>6} {report.updates_received:>9} "
            f"{converged:>10} {report.steps_back:>10} {len(report.violations):>11}"
        )
        for violation in report.violations[:5]:
            print(f"    {violation}")


if __name__ == "__main__":
    main()
