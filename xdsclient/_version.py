"""The package version, in a module of its own.

Why apart from the facade (``xdsclient/__init__.py``): modules that need the version (the
CLI's ``--version``, the node's user agent, the meter's instrumentation version) import it
from here, so nothing inside the package imports the facade and the facade can import any
module without a cycle. Keep it equal to ``version`` in pyproject.toml (a test checks).
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0.dev0"
