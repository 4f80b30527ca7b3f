"""The ``prefix`` dialect: every named attribute starts with its string, case-sensitively."""

from __future__ import annotations

from ..base import Event, canonical_string
from .attributes import parse_attribute_map

__all__ = ["PrefixFilter", "compile_prefix"]


class PrefixFilter:
    """``{"prefix": {name: value, ...}}``; a missing attribute means no match."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    def matches(self, event: Event) -> bool:
        """Whether every attribute's canonical string starts with the expected value."""
        for name, expected in self.pairs:
            value = event.get(name)
            if type(value) is not str:
                value = canonical_string(value)
                if value is None:
                    return False
            if not value.startswith(expected):
                return False
        return True

    def __repr__(self) -> str:
        return f"PrefixFilter({dict(self.pairs)!r})"


def compile_prefix(value: object, path: str) -> PrefixFilter:
    """Build a ``prefix`` filter from its JSON value; raises FilterError when invalid."""
    return PrefixFilter(parse_attribute_map("prefix", value, path))
