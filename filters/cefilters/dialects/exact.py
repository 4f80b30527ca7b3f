"""The ``exact`` dialect: every named attribute equals its string, case-sensitively."""

from __future__ import annotations

import operator

from .attributes import AttributeMapFilter, parse_attribute_map

__all__ = ["ExactFilter", "compile_exact"]


class ExactFilter(AttributeMapFilter):
    """``{"exact": {name: value, ...}}``; a missing attribute means no match."""

    __slots__ = ()

    # operator.eq rather than str.__eq__: the plain C function costs less per call on this hot path.
    dialect = "exact"
    lead = "exact {name}"
    compare = staticmethod(operator.eq)

    @staticmethod
    def phrase(actual: str, expected: str, held: bool, /) -> str:
        """``'us/42' equals 'us/42'`` or ``'us/42' does not equal 'eu/42'``."""
        return f"{actual} equals {expected}" if held else f"{actual} does not equal {expected}"


def compile_exact(value: object, path: str) -> ExactFilter:
    """Build an ``exact`` filter from its JSON value; raises FilterError when invalid."""
    return ExactFilter(parse_attribute_map("exact", value, path))
