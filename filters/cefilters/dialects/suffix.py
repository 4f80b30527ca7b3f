"""The ``suffix`` dialect: every named attribute ends with its string, case-sensitively."""

from __future__ import annotations

from .attributes import AttributeMapFilter, parse_attribute_map

__all__ = ["SuffixFilter", "compile_suffix"]


class SuffixFilter(AttributeMapFilter):
    """``{"suffix": {name: value, ...}}``; a missing attribute means no match."""

    __slots__ = ()

    dialect = "suffix"
    lead = "suffix of {name}"
    compare = staticmethod(str.endswith)

    @staticmethod
    def phrase(actual: str, expected: str, held: bool, /) -> str:
        """``'/42' ends 'eu/42'`` or ``'/42' does not end 'eu/7'``."""
        return f"{expected} ends {actual}" if held else f"{expected} does not end {actual}"


def compile_suffix(value: object, path: str) -> SuffixFilter:
    """Build a ``suffix`` filter from its JSON value; raises FilterError when invalid."""
    return SuffixFilter(parse_attribute_map("suffix", value, path))
