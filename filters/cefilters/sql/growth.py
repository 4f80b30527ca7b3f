"""How large a string a CESQL expression can build: the static half of its budget.

CESQL has no loops, so an expression's running time is bounded by its length; what is not is
the size of the strings its functions build: ``CONCAT_WS(s, s, s)`` with ``s`` itself a
``CONCAT_WS`` of an attribute triples at each level, and eight levels over a 100-byte attribute
make gigabytes. Two bounds hold this:

- at compile time, :func:`check_growth` estimates the largest string every function call can
  build as ``copies`` × (an attribute's length) + ``characters``, and refuses an expression
  whose estimate exceeds :data:`MAX_COPIES` copies of attributes or :data:`MAX_STRING_LENGTH`
  literal characters;
- at run time, every string function refuses to build a result longer than
  :data:`MAX_STRING_LENGTH` (``cefilters.sql.functions``): the evaluation fails, which a filter
  reads as "no match".
"""

from __future__ import annotations

from typing import Final

from cefilters.sql.ast import Attribute, Call, Chain, Exists, In, Like, Literal, Node, Unary
from cefilters.sql.errors import ParseError

__all__ = ["MAX_COPIES", "MAX_STRING_LENGTH", "check_growth"]

MAX_COPIES: Final = 256
"""Most copies of attribute values one string built by an expression may hold (statically)."""

MAX_STRING_LENGTH: Final = 1 << 20
"""Longest string (in characters) a function may build, checked before building it."""

_INTEGER_TEXT: Final = 11  # "-2147483648": the longest Integer as a String
_GROWING: Final = frozenset({"CONCAT", "CONCAT_WS"})
_SAME_SIZE: Final = frozenset({"TRIM", "LEFT", "RIGHT", "SUBSTRING", "STRING"})
_CASE: Final = frozenset({"LOWER", "UPPER"})  # a character may map to up to three


def _size(node: Node) -> tuple[int, int]:
    """(copies of attribute values, literal characters) in the largest string ``node`` yields."""
    if isinstance(node, Literal):
        value = node.value
        return (0, len(value)) if isinstance(value, str) else (0, _INTEGER_TEXT)
    if isinstance(node, Attribute):
        return (1, 0)
    if isinstance(node, Exists | Like | In):
        return (0, 5)  # a Boolean: "false"
    if isinstance(node, Unary | Chain):
        return (0, _INTEGER_TEXT)  # an Integer or a Boolean
    if isinstance(node, Call):
        name = node.name.upper()
        sizes = [_size(arg) for arg in node.args]
        if name == "CONCAT":
            return (sum(c for c, _ in sizes), sum(n for _, n in sizes))
        if name == "CONCAT_WS" and sizes:
            (sep_copies, sep_chars), parts = sizes[0], sizes[1:]
            joins = max(len(parts) - 1, 0)
            return (
                sep_copies * joins + sum(c for c, _ in parts),
                sep_chars * joins + sum(n for _, n in parts),
            )
        if name in _CASE and sizes:
            return (3 * sizes[0][0], 3 * sizes[0][1])
        if name in _SAME_SIZE and sizes:
            return sizes[0]
        return (1, _INTEGER_TEXT)  # another function: assume it returns up to an attribute's size
    return (1, 0)


def check_growth(text: str, node: Node) -> None:
    """Raise ParseError when a function in ``node`` could build a string over the static budget."""
    for call in _calls(node):
        if call.name.upper() not in _GROWING | _CASE:
            continue
        copies, characters = _size(call)
        if copies > MAX_COPIES or characters > MAX_STRING_LENGTH:
            raise ParseError(
                text,
                call.position,
                f"over budget: {call.name.upper()} could build a string of {copies} copies of"
                f" attribute values and {characters} more characters (the budget is {MAX_COPIES}"
                f" copies and {MAX_STRING_LENGTH} characters)",
            )


def _calls(node: Node) -> list[Call]:
    """Every call in ``node``, outermost first (iterative: the tree is at most 64 deep anyway)."""
    found: list[Call] = []
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Call):
            found.append(current)
            stack.extend(current.args)
        elif isinstance(current, Chain):
            stack.extend(current.operands)
        elif isinstance(current, Unary | Like):
            stack.append(current.operand)
        elif isinstance(current, In):
            stack.append(current.operand)
            stack.extend(current.items)
    return found
