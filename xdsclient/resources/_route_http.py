"""The parts of a RouteConfiguration Envoy's HTTP router reads and gRPC does not, decoded.

Why apart from `_route`: gRPC's decoder reads a route's match and action as C-core does, lean;
these parts (a route's redirect or direct response, request headers to add, query parameter
conditions, rewrites, timeouts, HTTP retry conditions, cookie / query / source-IP hashing) are
read only when present, by `_route` and by the reference decoder the differential test holds it
to, so both give one verdict for them. An invalid part (a regex RE2 rejects, a status out of
Envoy's range, a negative duration) is an error naming its field, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._filters import check_duration
from ._regex import Regex, RegexError, compile_regex
from ._route_values import (
    DirectResponse,
    HashPolicy,
    HashPolicyKind,
    HeaderAppendAction,
    HeaderMatcher,
    HeaderMatchKind,
    HeaderToAdd,
    QueryParameterMatcher,
    RedirectAction,
    RegexRewrite,
)
from ._view import invalid

__all__ = [
    "action_http_fields",
    "direct_response",
    "headers_to_add",
    "query_parameter_matcher",
    "redirect_action",
    "retry_http_fields",
]

#: RedirectAction.RedirectResponseCode, by enum number.
_REDIRECT_CODES = {0: 301, 1: 302, 2: 303, 3: 307, 4: 308}
#: HeaderValueOption.HeaderAppendAction, by enum number.
_APPEND_ACTIONS = dict(enumerate(HeaderAppendAction))
#: The ``retry_on`` conditions of Envoy's HTTP router.
_HTTP_RETRY_ON = frozenset(
    {
        "5xx",
        "gateway-error",
        "reset",
        "reset-before-request",
        "connect-failure",
        "envoy-ratelimited",
        "retriable-4xx",
        "refused-stream",
        "retriable-status-codes",
        "retriable-headers",
        "http3-post-connect-failure",
    }
)
_STRING_PATTERNS = {
    "exact": HeaderMatchKind.EXACT,
    "prefix": HeaderMatchKind.PREFIX,
    "suffix": HeaderMatchKind.SUFFIX,
    "contains": HeaderMatchKind.CONTAINS,
}

#: Decodes one HeaderMatcher (the caller's own, so the reference decoder can pass its own).
HeaderMatcherDecoder = Callable[[str, str, Any], Any]


def _compile(name: str, path: str, pattern: str) -> Regex:
    try:
        return compile_regex(pattern)
    except RegexError as exc:
        raise invalid(name, path, f"invalid regex {pattern!r}: {exc}") from None


def _regex_rewrite(name: str, path: str, rewrite: Any) -> RegexRewrite:
    """A RegexMatchAndSubstitute (``path``: the field holding it)."""
    pattern = rewrite.pattern.regex
    regex = _compile(name, f"{path}.pattern.regex", pattern)
    return RegexRewrite(pattern=pattern, substitution=rewrite.substitution, regex=regex)


def redirect_action(name: str, path: str, redirect: Any) -> RedirectAction:
    """A route's ``redirect`` (``path``: the route)."""
    where = f"{path}.redirect"
    code = redirect.response_code
    if code not in _REDIRECT_CODES:
        raise invalid(name, f"{where}.response_code", f"unknown response code {code}")
    scheme = "https" if redirect.https_redirect else redirect.scheme_redirect
    rewrite = (
        _regex_rewrite(name, f"{where}.regex_rewrite", redirect.regex_rewrite)
        if redirect.HasField("regex_rewrite")
        else None
    )
    return RedirectAction(
        scheme=scheme.lower(),
        host=redirect.host_redirect,
        port=redirect.port_redirect,
        path=redirect.path_redirect,
        prefix_rewrite=redirect.prefix_rewrite,
        regex_rewrite=rewrite,
        response_code=_REDIRECT_CODES[code],
        strip_query=redirect.strip_query,
    )


def direct_response(name: str, path: str, response: Any) -> DirectResponse:
    """A route's ``direct_response`` (``path``: the route): a status in [200, 600) as Envoy
    requires, and an inline body."""
    status = response.status
    if not 200 <= status < 600:
        raise invalid(name, f"{path}.direct_response.status", "must be in [200, 600)")
    body = response.body
    which = body.WhichOneof("specifier") if response.HasField("body") else None
    data = b""
    if which == "inline_bytes":
        data = body.inline_bytes
    elif which == "inline_string":
        data = body.inline_string.encode()
    return DirectResponse(status=status, body=data)


def headers_to_add(options: Any) -> tuple[HeaderToAdd, ...]:
    """``request_headers_to_add``: the deprecated ``append`` wins over ``append_action`` when
    set, as in Envoy (true appends, false overwrites)."""
    result = []
    for option in options:
        header = option.header
        value = header.value or header.raw_value.decode("utf-8", "replace")
        if option.HasField("append"):
            action = (
                HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD
                if option.append.value
                else HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD
            )
        else:
            action = _APPEND_ACTIONS.get(
                option.append_action, HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD
            )
        result.append(
            HeaderToAdd(
                name=header.key.lower(),
                value=value,
                append_action=action,
                keep_empty_value=option.keep_empty_value,
            )
        )
    return tuple(result)


def query_parameter_matcher(name: str, path: str, matcher: Any) -> QueryParameterMatcher:
    """One QueryParameterMatcher (``path``: it)."""
    if matcher.HasField("string_match"):
        string = matcher.string_match
        which = string.WhichOneof("match_pattern")
        if which == "safe_regex":
            pattern = string.safe_regex.regex
            regex = _compile(name, f"{path}.string_match.safe_regex.regex", pattern)
            return QueryParameterMatcher(
                name=matcher.name, kind=HeaderMatchKind.SAFE_REGEX, value=pattern, regex=regex
            )
        if which in _STRING_PATTERNS:
            return QueryParameterMatcher(
                name=matcher.name,
                kind=_STRING_PATTERNS[which],
                value=getattr(string, which),
                ignore_case=string.ignore_case,
            )
        raise invalid(name, f"{path}.string_match", f"unsupported pattern {which or '(none)'}")
    return QueryParameterMatcher(name=matcher.name, kind=HeaderMatchKind.PRESENT)


def action_http_fields(name: str, path: str, action: Any) -> dict[str, Any]:
    """A RouteAction's rewrites, timeout and Envoy's hash policies, as keyword arguments of
    `RouteAction` (``path``: the action)."""
    rewrite = (
        _regex_rewrite(name, f"{path}.regex_rewrite", action.regex_rewrite)
        if action.HasField("regex_rewrite")
        else None
    )
    timeout = (
        check_duration(name, f"{path}.timeout", action.timeout)
        if action.HasField("timeout")
        else None
    )
    return {
        "prefix_rewrite": action.prefix_rewrite,
        "regex_rewrite": rewrite,
        "host_rewrite_literal": action.host_rewrite_literal,
        "timeout": timeout,
        "http_hash_policies": _http_hash_policies(name, path, action.hash_policy),
    }


def _http_hash_policies(name: str, path: str, policies: Any) -> tuple[HashPolicy, ...]:
    """Every policy of a kind Envoy's router hashes, in order (``path``: the action)."""
    hashes = []
    for i, policy in enumerate(policies):
        which = policy.WhichOneof("policy_specifier")
        where = f"{path}.hash_policy[{i}]"
        if which == "header":
            header = policy.header
            rewrite = (
                _regex_rewrite(name, f"{where}.header.regex_rewrite", header.regex_rewrite)
                if header.HasField("regex_rewrite")
                else None
            )
            hashes.append(
                HashPolicy(
                    kind=HashPolicyKind.HEADER,
                    header_name=header.header_name.lower(),
                    regex=rewrite.regex if rewrite else None,
                    substitution=rewrite.substitution if rewrite else "",
                    terminal=policy.terminal,
                )
            )
        elif which == "cookie":
            cookie = policy.cookie
            ttl = (
                check_duration(name, f"{where}.cookie.ttl", cookie.ttl)
                if cookie.HasField("ttl")
                else None
            )
            hashes.append(
                HashPolicy(
                    kind=HashPolicyKind.COOKIE,
                    name=cookie.name,
                    cookie_ttl=ttl,
                    cookie_path=cookie.path,
                    terminal=policy.terminal,
                )
            )
        elif which == "query_parameter":
            hashes.append(
                HashPolicy(
                    kind=HashPolicyKind.QUERY_PARAMETER,
                    name=policy.query_parameter.name,
                    terminal=policy.terminal,
                )
            )
        elif which == "connection_properties" and policy.connection_properties.source_ip:
            hashes.append(HashPolicy(kind=HashPolicyKind.SOURCE_IP, terminal=policy.terminal))
    return tuple(hashes)


def _retriable_header(
    name: str, path: str, header: Any, header_matcher: HeaderMatcherDecoder
) -> Any:
    """A retriable header condition: one with no match specifier tests presence, as Envoy reads
    it (gRPC's route matchers require one, and ``header_matcher`` says so)."""
    if header.WhichOneof("header_match_specifier") is None:
        return HeaderMatcher(
            name=header.name.lower(), kind=HeaderMatchKind.PRESENT, invert=header.invert_match
        )
    return header_matcher(name, path, header)


def retry_http_fields(
    name: str, path: str, policy: Any, header_matcher: HeaderMatcherDecoder
) -> dict[str, Any]:
    """A RetryPolicy's HTTP conditions, as keyword arguments of `RetryPolicy` (``path``: the
    policy; ``header_matcher`` decodes a HeaderMatcher as the caller's decoder does)."""
    conditions = frozenset(
        code.strip() for code in policy.retry_on.split(",") if code.strip() in _HTTP_RETRY_ON
    )
    per_try = (
        check_duration(name, f"{path}.per_try_timeout", policy.per_try_timeout)
        if policy.HasField("per_try_timeout")
        else None
    )
    headers = tuple(
        _retriable_header(name, f"{path}.retriable_headers[{i}]", header, header_matcher)
        for i, header in enumerate(policy.retriable_headers)
    )
    predicates = tuple(
        predicate.typed_config.type_url or predicate.name
        for predicate in policy.retry_host_predicate
    )
    attempts = policy.host_selection_retry_max_attempts
    return {
        "http_retry_on": conditions,
        "retriable_status_codes": tuple(policy.retriable_status_codes),
        "retriable_headers": headers,
        "per_try_timeout": per_try,
        "retry_host_predicates": predicates,
        "host_selection_retry_max_attempts": attempts if attempts > 0 else 1,
    }
