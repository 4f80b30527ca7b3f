"""The compiled-filter contract shared by every dialect, and the value canonicalisation they use."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from typing import Final, Protocol, runtime_checkable

from .checks import Check

__all__ = ["MATCH_ALL", "Event", "Filter", "MatchAll", "canonical_string"]

Event = Mapping[str, object]
"""An event: CloudEvents attribute names to values as in the JSON format (strings for URI,
URI-reference and timestamp; ``int`` and ``bool`` for integer and boolean extensions)."""


@runtime_checkable
class Filter(Protocol):
    """A compiled filter expression.

    Structural so that every dialect is a small independent class; ``matches`` never raises,
    whatever the event holds (an evaluation problem means "no match").
    """

    def matches(self, event: Event) -> bool:
        """Whether ``event`` passes this filter."""
        ...


class MatchAll:
    """The empty filters array: the Subscriptions API says it matches every event."""

    __slots__ = ()

    def matches(self, event: Event) -> bool:
        """Always ``True``."""
        return True

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """One check that holds: there is no condition to fail."""
        return [Check(pointer, True, "no filters: every event passes")]

    def __repr__(self) -> str:
        return "MatchAll()"


MATCH_ALL: Final = MatchAll()


def canonical_string(value: object) -> str | None:
    """The string form an attribute value is compared by, or ``None`` if it has none.

    These are the CloudEvents canonical string encodings, the same forms CloudEvents SQL gives an
    attribute it casts to String, so every dialect and the index agree: strings as themselves,
    booleans as ``true``/``false``, integers in decimal (an integral float, as some JSON decoders
    produce, is an integer), timestamps given as ``datetime`` in RFC 3339 and binary values in
    base64. Anything else (a fractional float, a nested object from a malformed event) has no
    canonical form and therefore never matches.
    """
    if type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        try:
            return str(int(value))  # int(): an IntEnum member prints its number, not its name
        except ValueError:  # more digits than the interpreter converts (sys.int_info)
            return None
    if isinstance(value, str):
        return str.__str__(value)  # a str subclass compares by its characters, not its __str__
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**63 else None
    if isinstance(value, datetime.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return None
