"""Suite-wide settings."""

from __future__ import annotations

import os

# grpc's C core logs connection churn at INFO; tests provoke plenty of it on purpose.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
