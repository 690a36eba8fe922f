"""``python -m xdsclient demo``."""

from __future__ import annotations

import sys

from ._demo import main

sys.exit(main())
