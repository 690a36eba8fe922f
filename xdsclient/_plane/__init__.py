"""The asyncio shell of the call path every front end shares (the gRPC channel, the httpx
transport): waiting for a configuration, the pick loop, following a call's plan
(`follow_plan`), load reporters, connectivity to the picker, and the words of a failure that
are not one front end's; and what they share beyond it: the TLS policy of a cluster and the
certificates it uses (`_tls_policy`).

Why a package of its own: the sans-I/O call path (`xdsclient._call`) decides; something must
still hold the picker, wait (for a snapshot, for a queued pick's next chance, never past a
deadline) and count loads, in the same way for every front end. Private, beside the client as
``_call`` is: the front ends are the public surface.
"""

from __future__ import annotations

from ._core import DEADLINE, PickWait, PlaneCore
from ._failures import empty_assignment, resource_details
from ._follow import follow_plan

__all__ = [
    "DEADLINE",
    "PickWait",
    "PlaneCore",
    "empty_assignment",
    "follow_plan",
    "resource_details",
]
