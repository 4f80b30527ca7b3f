"""The ``prefix`` dialect: every named attribute starts with its string, case-sensitively."""

from __future__ import annotations

from .attributes import AttributeMapFilter, parse_attribute_map

__all__ = ["PrefixFilter", "compile_prefix"]


class PrefixFilter(AttributeMapFilter):
    """``{"prefix": {name: value, ...}}``; a missing attribute means no match."""

    __slots__ = ()

    dialect = "prefix"
    lead = "prefix of {name}"
    compare = staticmethod(str.startswith)

    @staticmethod
    def phrase(actual: str, expected: str, held: bool, /) -> str:
        """``'eu/' starts 'eu/42'`` or ``'eu/' does not start 'us/42'``."""
        return f"{expected} starts {actual}" if held else f"{expected} does not start {actual}"


def compile_prefix(value: object, path: str) -> PrefixFilter:
    """Build a ``prefix`` filter from its JSON value; raises FilterError when invalid."""
    return PrefixFilter(parse_attribute_map("prefix", value, path))
