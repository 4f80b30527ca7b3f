"""What the ``exact``, ``prefix`` and ``suffix`` dialects share: the attribute map they take and
the filter that tests each named attribute with one comparison.

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

from ..base import Event, canonical_string
from ..checks import Check
from ..errors import FilterError, pointer_token
from ..wording import attribute_detail, quote

__all__ = ["ATTRIBUTE_NAME", "AttributeMapFilter", "parse_attribute_map"]

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


class AttributeMapFilter:
    """A filter over an attribute map: every named attribute passes one string comparison.

    Subclasses name the dialect by class and set the static ``compare`` and the words ``explain``
    uses; a missing attribute, or one without a canonical string, means no match.
    """

    __slots__ = ("pairs",)

    dialect = ""
    """The dialect's JSON name."""

    lead = ""
    """How ``explain`` introduces one attribute's comparison (a format with ``{name}``)."""

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    @staticmethod
    def compare(actual: str, expected: str, /) -> bool:
        """The dialect's comparison of an attribute's string with the filter's value."""
        raise NotImplementedError

    @staticmethod
    def phrase(actual: str, expected: str, held: bool, /) -> str:
        """The comparison in words, from the quoted attribute value and the quoted filter value."""
        raise NotImplementedError

    def matches(self, event: Event) -> bool:
        """Whether every attribute's canonical string passes the comparison with its value."""
        compare = type(self).compare
        for name, expected in self.pairs:
            value = event.get(name)
            if type(value) is not str:
                value = canonical_string(value)
                if value is None:
                    return False
            if not compare(value, expected):
                return False
        return True

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """One check for the filter at ``pointer``, plus one per attribute when it names several.

        Every attribute is compared (``matches`` stops at the first that fails): a person wants
        to see each one, and the comparisons are pure, so the verdict is the same.
        """
        compare = type(self).compare
        own: list[Check] = []
        for name, expected in self.pairs:
            actual, spoken = attribute_detail(event, name)
            held = actual is not None and compare(actual, expected)
            words = spoken if actual is None else self.phrase(spoken, quote(expected), held)
            detail = f"{self.lead.format(name=name)}: {words}"
            own.append(Check(f"{pointer}/{self.dialect}/{pointer_token(name)}", held, detail))
        matched = all(check.matched for check in own)
        if len(own) == 1:
            return [Check(pointer, matched, own[0].detail)]
        failed = [check.detail for check in own if not check.matched]
        if matched:
            detail = f"{self.dialect}: {len(own)} of {len(own)} attributes matched"
        else:
            shown = "; ".join(failed[:4]) + ("; …" if len(failed) > 4 else "")
            detail = f"{self.dialect}: {len(own) - len(failed)} of {len(own)} attributes matched; {shown}"
        return [Check(pointer, matched, detail), *own]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.pairs)!r})"
