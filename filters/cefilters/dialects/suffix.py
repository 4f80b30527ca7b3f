"""The ``suffix`` dialect: every named attribute ends with its string, case-sensitively."""

from __future__ import annotations

from ..base import Event, canonical_string
from .attributes import parse_attribute_map

__all__ = ["SuffixFilter", "compile_suffix"]


class SuffixFilter:
    """``{"suffix": {name: value, ...}}``; a missing attribute means no match."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    def matches(self, event: Event) -> bool:
        """Whether every attribute's canonical string ends with the expected value."""
        for name, expected in self.pairs:
            value = event.get(name)
            if type(value) is not str:
                value = canonical_string(value)
                if value is None:
                    return False
            if not value.endswith(expected):
                return False
        return True

    def __repr__(self) -> str:
        return f"SuffixFilter({dict(self.pairs)!r})"


def compile_suffix(value: object, path: str) -> SuffixFilter:
    """Build a ``suffix`` filter from its JSON value; raises FilterError when invalid."""
    return SuffixFilter(parse_attribute_map("suffix", value, path))
