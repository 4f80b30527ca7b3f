"""The ``exact`` dialect: every named attribute equals its string, case-sensitively."""

from __future__ import annotations

from ..base import Event, canonical_string
from .attributes import parse_attribute_map

__all__ = ["ExactFilter", "compile_exact"]


class ExactFilter:
    """``{"exact": {name: value, ...}}``; a missing attribute means no match."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    def matches(self, event: Event) -> bool:
        """Whether every attribute's canonical string equals the expected value."""
        for name, expected in self.pairs:
            value = event.get(name)
            if type(value) is not str:
                value = canonical_string(value)
            if value != expected:
                return False
        return True

    def __repr__(self) -> str:
        return f"ExactFilter({dict(self.pairs)!r})"


def compile_exact(value: object, path: str) -> ExactFilter:
    """Build an ``exact`` filter from its JSON value; raises FilterError when invalid."""
    return ExactFilter(parse_attribute_map("exact", value, path))
