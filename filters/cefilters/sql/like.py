"""``LIKE`` patterns compiled to linear-time matchers (CESQL v1 §3.5.4).

``%`` matches any run of characters (also none), ``_`` exactly one character, ``\\%`` and ``\\_``
a literal ``%`` / ``_``; every other character, including a backslash not followed by ``%`` or
``_``, matches itself. Matching is case-sensitive, over the whole value, per Unicode code point.

No regular expressions: a pattern is split at its ``%`` into fixed-length segments. The first
segment must match at the start, the last at the end, and the ones between are found left to
right, each at its leftmost occurrence after the previous one (taking the leftmost occurrence
never loses a match, so there is no backtracking). Literal segments are found with ``str.find``;
segments holding ``_`` with a bit-parallel (shift-and) scan. Every step moves forward through the
value, so the time is linear in the value's length for a given pattern.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["LikePattern", "compile_like"]

PatternShape = Literal["exact", "prefix", "suffix", "contains", "any", "general"]


class _Segment:
    """A run of the pattern between two ``%``: literal pieces at fixed offsets, ``_`` elsewhere."""

    __slots__ = ("length", "literal", "masks", "pieces", "wildcard_mask")

    def __init__(
        self,
        length: int,
        pieces: tuple[tuple[int, str], ...],
        masks: dict[str, int] | None = None,
        wildcard_mask: int = 0,
    ) -> None:
        self.length = length
        self.pieces = pieces
        # Shift-and tables, only for segments containing "_": a bit per segment position.
        self.masks = masks or {}
        self.wildcard_mask = wildcard_mask
        #: The segment's text if it has no "_".
        self.literal: str | None = None if wildcard_mask else "".join(piece for _, piece in pieces)

    def matches_at(self, text: str, position: int) -> bool:
        # A plain loop: all() over a generator costs several times more on this hot path.
        for offset, piece in self.pieces:  # noqa: SIM110 - see above
            if not text.startswith(piece, position + offset):
                return False
        return True

    def find(self, text: str, start: int, end: int) -> int:
        """Leftmost start of an occurrence within ``text[start:end]``, or -1."""
        if self.literal is not None:
            return text.find(self.literal, start, end)
        goal = 1 << (self.length - 1)
        masks, default = self.masks, self.wildcard_mask
        state = 0
        for index in range(start, end):
            state = ((state << 1) | 1) & masks.get(text[index], default)
            if state & goal:
                return index - self.length + 1
        return -1


@dataclass(frozen=True, slots=True)
class LikePattern:
    """A compiled pattern. ``shape`` and ``literal`` let the compiler inline the common cases
    (``exact``: equals ``literal``; ``prefix``/``suffix``/``contains``: ``literal%``, ``%literal``,
    ``%literal%``; ``any``: ``%``); ``match`` works for every shape."""

    shape: PatternShape
    literal: str
    match: Callable[[str], bool]


def compile_like(pattern: str) -> LikePattern:
    """Compile a LIKE pattern (the string literal's decoded text)."""
    segments = [_segment(chars) for chars in _split(pattern)]
    literals = [segment.literal for segment in segments]
    if len(segments) == 1 and literals[0] is not None:
        exact = literals[0]
        return LikePattern("exact", exact, exact.__eq__)
    if len(segments) == 2 and literals[0] is not None and literals[1] is not None:
        head, tail = literals[0], literals[1]
        if not head and not tail:
            return LikePattern("any", "", _always)
        if not tail:
            return LikePattern("prefix", head, lambda text: text.startswith(head))
        if not head:
            return LikePattern("suffix", tail, lambda text: text.endswith(tail))
    if len(segments) == 3 and literals == ["", literals[1], ""] and literals[1]:
        middle = literals[1]
        return LikePattern("contains", middle, lambda text: middle in text)
    return LikePattern("general", "", _general_matcher(segments))


def _always(text: str) -> bool:
    return True


_ANY_ONE: Final = None  # stands for "_" in a split pattern


def _split(pattern: str) -> list[list[str | None]]:
    """The pattern's segments (split at unescaped ``%``), each a list of characters or
    ``_ANY_ONE``. Consecutive ``%`` give empty segments in between, which match trivially."""
    segments: list[list[str | None]] = [[]]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "%_":
            segments[-1].append(pattern[i + 1])
            i += 2
            continue
        if c == "%":
            segments.append([])
        elif c == "_":
            segments[-1].append(_ANY_ONE)
        else:
            segments[-1].append(c)
        i += 1
    # Drop empty segments strictly between two others: "a%%b" is "a%b".
    if len(segments) > 2:
        segments = [segments[0], *(s for s in segments[1:-1] if s), segments[-1]]
    return segments


def _segment(chars: list[str | None]) -> _Segment:
    pieces: list[tuple[int, str]] = []
    run: list[str] = []
    for offset, c in enumerate(chars):
        if c is _ANY_ONE:
            if run:
                pieces.append((offset - len(run), "".join(run)))
                run = []
        else:
            run.append(c)
    if run:
        pieces.append((len(chars) - len(run), "".join(run)))
    if _ANY_ONE not in chars:
        return _Segment(len(chars), tuple(pieces))
    wildcard_mask = sum(1 << offset for offset, c in enumerate(chars) if c is _ANY_ONE)
    masks: dict[str, int] = {}
    for offset, c in enumerate(chars):
        if c is not _ANY_ONE:
            masks[c] = masks.get(c, wildcard_mask) | (1 << offset)
    return _Segment(len(chars), tuple(pieces), masks, wildcard_mask)


def _general_matcher(segments: list[_Segment]) -> Callable[[str], bool]:
    first, last = segments[0], segments[-1]
    if len(segments) == 1:
        return lambda text: len(text) == first.length and first.matches_at(text, 0)
    middle = tuple(segments[1:-1])
    fixed = first.length + last.length

    def match(text: str) -> bool:
        end = len(text) - last.length
        if len(text) < fixed or not first.matches_at(text, 0) or not last.matches_at(text, end):
            return False
        position = first.length
        for segment in middle:
            found = segment.find(text, position, end)
            if found < 0:
                return False
            position = found + segment.length
        return True

    return match
