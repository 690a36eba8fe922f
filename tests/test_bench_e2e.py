"""bench/e2e.py runs end to end at a small N and reports the median of its full-load samples."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_full_load_shows_the_median_of_fresh_process_samples() -> None:
    """Three full loads of ours, each in its own process, give the table the median of the
    three and a line listing each."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "e2e.py"),
            "--sizes",
            "20",
            "--clients",
            "xdsclient",
            "--rounds",
            "1",
            "--load-samples",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        check=True,
    )
    out = run.stdout
    samples = re.search(
        r"N=20 xdsclient full load to the ACK: median (\S+) ms of 3 samples \((.*)\)", out
    )
    assert samples is not None, out
    each = [float(t.removesuffix(" ms")) for t in samples.group(2).split(", ")]
    assert len(each) == 3
    row = re.search(r"20  xdsclient\s+full load\s+(\S+) ms", out)
    assert row is not None, out
    assert float(row.group(1)) == float(samples.group(1))
    assert abs(float(samples.group(1)) - statistics.median(each)) <= 0.1  # shown to 0.1 ms
    assert run.stderr.count("measured xdsclient N=20 sample") == 3
    assert re.search(r"20  xdsclient\s+update all N\s+\S+ ms", out)  # the first sample's updates
