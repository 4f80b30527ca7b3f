"""Small reusable field checks: each takes (value, pointer, problems) and records what is wrong.

They never quote the value they check (it may be a secret); the caller's pointer names the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any
from urllib.parse import SplitResult, urlsplit

from cebroker.api.admission.problems import Problems, child, quote, type_name

#: A check of one field: records problems under the pointer it is given.
Check = Callable[[Any, str, Problems], None]

_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def string(value: Any, pointer: str, problems: Problems) -> bool:
    """A non-empty string."""
    if not isinstance(value, str):
        problems.add(pointer, f"must be a string, got {type_name(value)}")
        return False
    if not value:
        problems.add(pointer, "must not be empty")
        return False
    return True


def check_string(value: Any, pointer: str, problems: Problems) -> None:
    """:func:`string` as a :data:`Check`."""
    string(value, pointer, problems)


def boolean(value: Any, pointer: str, problems: Problems) -> None:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        problems.add(pointer, f"must be a boolean, got {type_name(value)}")


def integer(low: int, high: int) -> Check:
    """An integer in ``[low, high]`` (JSON booleans are not integers here)."""

    def check(value: Any, pointer: str, problems: Problems) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.add(pointer, f"must be an integer, got {type_name(value)}")
        elif not low <= value <= high:
            problems.add(pointer, f"must be between {low} and {high}")

    return check


def one_of(*allowed: str) -> Check:
    """One of the given strings (case-sensitive)."""

    def check(value: Any, pointer: str, problems: Problems) -> None:
        if value not in allowed or not isinstance(value, str):
            problems.add(pointer, f"must be one of {', '.join(map(repr, allowed))}")

    return check


def string_map(value: Any, pointer: str, problems: Problems) -> None:
    """An object whose keys are non-empty and whose values are strings."""
    if not isinstance(value, dict):
        problems.add(pointer, f"must be an object, got {type_name(value)}")
        return
    for key, item in value.items():
        if not key:
            problems.add(child(pointer, key), "keys must not be empty")
        elif not isinstance(item, str):
            problems.add(child(pointer, key), f"must be a string, got {type_name(item)}")


def no_spaces(value: Any, pointer: str, problems: Problems) -> bool:
    """A non-empty string without spaces or control characters."""
    if not string(value, pointer, problems):
        return False
    if _CONTROL_OR_SPACE.search(value):
        problems.add(pointer, "must not contain spaces or control characters")
        return False
    return True


def uri_reference(value: Any, pointer: str, problems: Problems) -> None:
    """A non-empty URI-reference (RFC 3986): no spaces or control characters, parseable."""
    if no_spaces(value, pointer, problems):
        try:
            urlsplit(value)
        except ValueError:
            problems.add(pointer, "must be a URI-reference")


def absolute_uri(
    value: Any,
    pointer: str,
    problems: Problems,
    schemes: Collection[str] | None,
    scheme_message: str | None = None,
) -> SplitResult | None:
    """An absolute URI with a host and (unless ``schemes`` is None) one of ``schemes``.

    Returns the parsed URI when valid; ``scheme_message`` replaces the default wrong-scheme text.
    """
    if not no_spaces(value, pointer, problems):
        return None
    text: str = value
    try:
        parts = urlsplit(text)
    except ValueError:
        problems.add(pointer, "must be an absolute URI")
        return None
    if not parts.scheme or not parts.netloc:
        problems.add(pointer, "must be an absolute URI with a scheme and a host, like https://host/path")
        return None
    if schemes is not None and parts.scheme.lower() not in schemes:
        problems.add(pointer, scheme_message or f"the scheme must be one of {', '.join(sorted(schemes))}")
        return None
    return parts


def host_and_port(parts: SplitResult, pointer: str, problems: Problems) -> None:
    """The authority of ``parts`` names a host and, if any, a port in 1-65535."""
    try:
        port = parts.port
    except ValueError:
        problems.add(pointer, "the port must be a number between 1 and 65535")
        return
    if not parts.hostname:
        problems.add(pointer, "must name a host")
    elif port == 0:
        problems.add(pointer, "the port must be a number between 1 and 65535")


#: Why a URL with user information is refused (the same words for every URL of a subscription).
USERINFO_REFUSED = (
    "must not carry user information (a user name, password or token before '@'): a URL is"
    " stored, listed and logged; give credentials in 'sinkcredential'"
)


def no_userinfo(parts: SplitResult, pointer: str, problems: Problems) -> None:
    """No user information in the URL, neither a password nor a user name alone (which is
    often a token): it would be stored, listed and logged with the URL. Credentials go in
    ``sinkcredential``, which is write-only and encrypted at rest."""
    if "@" in parts.netloc:
        problems.add(pointer, USERINFO_REFUSED)


def timestamp(value: Any, pointer: str, problems: Problems) -> None:
    """An RFC 3339 timestamp with a time zone, like ``2030-01-01T00:00:00Z``."""
    if not string(value, pointer, problems):
        return
    if _RFC3339.fullmatch(value):
        try:
            datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
            return
        except ValueError:
            pass
    problems.add(pointer, "must be an RFC 3339 timestamp with a time zone, like 2030-01-01T00:00:00Z")


def known_members(
    value: dict[str, Any], pointer: str, problems: Problems, checks: dict[str, Check], what: str
) -> None:
    """Run ``checks`` on the members present; name every member that has no check."""
    for key, item in value.items():
        check = checks.get(key)
        if check is None:
            problems.add(
                child(pointer, key),
                f"unknown {what} {quote(key)}; known: {', '.join(sorted(checks)) or 'none'}",
            )
        else:
            check(item, child(pointer, key), problems)
