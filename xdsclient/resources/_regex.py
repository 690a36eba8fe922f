"""RE2 for every regular expression in xDS resources (gRPC and Envoy use RE2, never PCRE).

Why not Python's `re`: its syntax is a superset of RE2's (backreferences, lookaround) and its
semantics differ in places, so a pattern C-core rejects would be accepted here and a route would
match differently than on every other client of the mesh. `google-re2` is the RE2 library with
Python bindings; every pattern is compiled with it (a pattern it rejects is a validation error
naming the field), and matching uses it.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Regex", "RegexError", "compile_regex"]


class Regex(Protocol):
    """A compiled RE2 pattern (what the views keep and match with)."""

    @property
    def pattern(self) -> str: ...

    def fullmatch(self, text: str) -> Any: ...

    def sub(self, replacement: str, text: str) -> str: ...


class RegexError(ValueError):
    """RE2 rejected the pattern; the message says why."""


def _options(re2: Any, ignore_case: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # the error is raised, not also printed by RE2 to stderr
    options.case_sensitive = not ignore_case
    return options


def compile_regex(pattern: str, *, ignore_case: bool = False) -> Regex:
    """Compile ``pattern`` with RE2; `RegexError` with RE2's reason when it is not valid RE2."""
    import re2  # on the first regex a resource names: 1 MiB a client without any never loads

    try:
        compiled: Regex = re2.compile(pattern, _options(re2, ignore_case))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RegexError(f"not a valid RE2 pattern: {reason}") from None
    return compiled
