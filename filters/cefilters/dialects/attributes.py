"""What the ``exact``, ``prefix`` and ``suffix`` dialects share: the attribute map they take.

Subscriptions API, Filters: "The keys are the names of the CloudEvents attributes to be matched, and
their values are the String values to use in the comparison ... The attribute name and value
specified in the filter expression MUST NOT be empty strings."

Decision: beyond non-empty, names must also be valid CloudEvents attribute names (lowercase ASCII
letters and digits, CloudEvents core "Attribute Naming Convention"), and not ``data``, which names
the payload. No event can carry an attribute ``Type`` or ``my-ext``, so such a filter could never
match; rejecting it tells the user at create time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ..errors import FilterError, pointer_token

__all__ = ["ATTRIBUTE_NAME", "parse_attribute_map"]

ATTRIBUTE_NAME: Final = re.compile(r"[a-z0-9]+")
"""The CloudEvents attribute naming convention (core spec, section "Attribute Naming Convention")."""

PAYLOAD_MEMBERS: Final = frozenset({"data", "data_base64"})
"""Members of a JSON-format event that hold the payload, not context attributes (core spec:
``data`` is reserved and is not an attribute; JSON format: ``data_base64``)."""


def parse_attribute_map(dialect: str, value: object, path: str) -> tuple[tuple[str, str], ...]:
    """Validate a dialect's ``{attribute: string}`` object; returns its pairs in input order.

    Raises:
        FilterError: the value is not an object, is empty, or has an invalid name or value; the
            path points at the offending member.
    """
    if not isinstance(value, Mapping):
        raise FilterError(path, f"{dialect!r} takes an object of attribute names to strings")
    if not value:
        raise FilterError(path, f"{dialect!r} needs at least one attribute")
    pairs: list[tuple[str, str]] = []
    for name, expected in value.items():
        member = f"{path}/{pointer_token(name) if isinstance(name, str) else name}"
        if not isinstance(name, str) or not name:
            raise FilterError(member, "the attribute name must not be empty")
        if not ATTRIBUTE_NAME.fullmatch(name):
            raise FilterError(
                member,
                f"{name!r} is not a CloudEvents attribute name (lowercase letters a-z and digits only)",
            )
        if name in PAYLOAD_MEMBERS:
            raise FilterError(member, f"{name!r} is the event payload, not a context attribute")
        if not isinstance(expected, str):
            raise FilterError(member, f"the value must be a string, not {type(expected).__name__}")
        if not expected:
            raise FilterError(member, "the value must not be an empty string")
        pairs.append((name, expected))
    return tuple(pairs)
