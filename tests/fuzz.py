"""How many examples a property-based or fuzz test runs: a short budget in `make test`, the full
one in `make test-long` (which CI runs too).

Why two budgets: the properties are worth running long, but `make test` must stay quick on two
cores. ``XDSCLIENT_FUZZ=long`` gives every property its full budget; the default runs a fifth of
it. ``XDS_FUZZ_EXAMPLES`` still sets one number for every property, for a focused run.
"""

from __future__ import annotations

import os

#: the share of its full budget a property runs in `make test`
SHORT_SHARE = 5


def examples(full: int) -> int:
    """The number of examples for a property whose full budget is ``full``."""
    fixed = os.environ.get("XDS_FUZZ_EXAMPLES")
    if fixed:
        return int(fixed)
    if os.environ.get("XDSCLIENT_FUZZ") == "long":
        return full
    return max(full // SHORT_SHARE, 10)
