"""CESQL syntax tree. Every node records the 0-based offset of its token for messages.

Runs of binary operators of one precedence level are kept flat (``Chain``) instead of as a
left-leaning tree, so a long ``a OR b OR c ...`` does not make the tree (and the compiled
closures' call depth) grow with its length.
"""

from __future__ import annotations

from dataclasses import dataclass

from cefilters.sql.types import Value

__all__ = ["Attribute", "Call", "Chain", "Exists", "In", "Like", "Literal", "Node", "Unary"]


@dataclass(frozen=True, slots=True)
class Literal:
    """A Boolean, Integer or String literal."""

    value: Value
    position: int


@dataclass(frozen=True, slots=True)
class Attribute:
    """A context attribute or extension, by its lower-cased name."""

    name: str
    position: int


@dataclass(frozen=True, slots=True)
class Exists:
    """``EXISTS name``."""

    name: str
    position: int


@dataclass(frozen=True, slots=True)
class Unary:
    """``NOT operand`` or ``-operand``."""

    operator: str
    operand: Node
    position: int


@dataclass(frozen=True, slots=True)
class Chain:
    """``operands[0] operators[0] operands[1] operators[1] ...``, evaluated left to right.

    All operators belong to one precedence level; ``positions[i]`` is where ``operators[i]`` is.
    """

    operands: tuple[Node, ...]
    operators: tuple[str, ...]
    positions: tuple[int, ...]

    @property
    def position(self) -> int:
        """Where the first operator is."""
        return self.positions[0]


@dataclass(frozen=True, slots=True)
class Like:
    """``operand [NOT] LIKE 'pattern'``; the pattern is always a string literal."""

    operand: Node
    pattern: str
    negated: bool
    position: int


@dataclass(frozen=True, slots=True)
class In:
    """``operand [NOT] IN (items...)``, never empty."""

    operand: Node
    items: tuple[Node, ...]
    negated: bool
    position: int


@dataclass(frozen=True, slots=True)
class Call:
    """``NAME(args...)``; ``name`` is upper-cased."""

    name: str
    args: tuple[Node, ...]
    position: int


Node = Literal | Attribute | Exists | Unary | Chain | Like | In | Call
