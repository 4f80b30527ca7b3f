"""What a CloudEvents SQL filter implies about attributes, so ``sql`` subscriptions can be indexed.

:func:`implied_filter` turns an expression into a filter built from ``exact``/``prefix``/
``suffix``/``all``/``any`` that every event passing the expression also passes: a necessary
condition, never a sufficient one. The index anchors on it and still evaluates the full expression
on the candidates it finds, so the derivation only has to be sound, not complete:

- ``a AND b``: both hold, so either side's condition is implied (``all`` of those derivable);
  ``a OR b`` and ``a XOR b``: one side holds (``any``, only if both sides give a condition).
  Chains mixing them are read left to right, as the engine evaluates them.
- ``attr = 'text'``, ``'text' = attr``, ``attr IN ('t1', 't2')``: ``exact``. Only for text literals
  whose comparison cannot succeed through a cast to another type: not ``true``/``false`` in any case
  (Boolean casts), and either not an integer or an integer in canonical decimal form (``'42'``, not
  ``'042'``), because ``'042' = 42`` is true in CESQL while the canonical string of 42 is ``42``.
- ``attr LIKE 'p%...'``: ``prefix`` ``p``; ``'...%s'``: ``suffix`` ``s``; no wildcard: ``exact``
  (``_`` and backslash escapes end a literal run like ``%``).
  LIKE compares the attribute's string form, which is the canonical string the index uses.
- Anything else (``NOT``, ``EXISTS``, other comparisons, functions) implies nothing.
"""

from __future__ import annotations

from typing import Final

from ..base import Filter
from ..dialects.exact import ExactFilter
from ..dialects.logical import AllFilter, AnyFilter
from ..dialects.prefix import PrefixFilter
from ..dialects.suffix import SuffixFilter
from ..errors import FilterError
from ..sql import ast
from ..sql.parser import parse

__all__ = ["implied_filter"]

_INTEGER_CHARS: Final = frozenset("+-0123456789")
_WILDCARDS: Final = frozenset("%_\\")


def implied_filter(text: str) -> Filter | None:
    """A filter every event accepted by the CESQL expression ``text`` passes, or ``None``."""
    try:
        tree = parse(text)
    except (FilterError, RecursionError):  # already rejected or accepted by the engine; be safe
        return None
    return _implied(tree)


def _implied(node: ast.Node) -> Filter | None:
    if isinstance(node, ast.Chain):
        if node.operators == ("=",):
            return _equality(node.operands[0], node.operands[1])
        if all(op in ("AND", "OR", "XOR") for op in node.operators):
            return _logic(node)
        return None
    if isinstance(node, ast.Like) and not node.negated and isinstance(node.operand, ast.Attribute):
        return _like(node.operand.name, node.pattern)
    if isinstance(node, ast.In) and not node.negated and isinstance(node.operand, ast.Attribute):
        texts = [_safe_text(item) for item in node.items]
        if any(t is None for t in texts):
            return None
        name = node.operand.name
        exacts: list[Filter] = [ExactFilter(((name, t),)) for t in dict.fromkeys(texts) if t is not None]
        return exacts[0] if len(exacts) == 1 else AnyFilter(tuple(exacts))
    return None


def _logic(chain: ast.Chain) -> Filter | None:
    implied = _implied(chain.operands[0])
    for operator, operand in zip(chain.operators, chain.operands[1:], strict=True):
        right = _implied(operand)
        if operator == "AND":
            if implied is None or right is None:
                implied = implied if right is None else right
            else:
                implied = AllFilter((implied, right))
        else:  # OR, XOR: at least one side is true
            implied = None if implied is None or right is None else AnyFilter((implied, right))
    return implied


def _equality(left: ast.Node, right: ast.Node) -> Filter | None:
    if isinstance(right, ast.Attribute):
        left, right = right, left
    if not isinstance(left, ast.Attribute):
        return None
    text = _safe_text(right)
    return None if text is None else ExactFilter(((left.name, text),))


def _safe_text(node: ast.Node) -> str | None:
    """The literal's text if equality with it implies the attribute's canonical string equals it."""
    if not isinstance(node, ast.Literal) or type(node.value) is not str or not node.value:
        return None
    text = node.value
    if text.lower() in ("true", "false"):
        return None
    if set(text) <= _INTEGER_CHARS and text != _canonical_integer(text):
        return None
    return text


def _canonical_integer(text: str) -> str | None:
    try:
        return str(int(text))
    except ValueError:
        return None


def _like(name: str, pattern: str) -> Filter | None:
    """The literal runs at the start and at the end of a LIKE pattern.

    A backslash ends a run as a wildcard does: escapes are not interpreted here, which can only
    make the implied condition weaker, never wrong.
    """
    cuts = [i for i, char in enumerate(pattern) if char in _WILDCARDS]
    if not cuts:
        return ExactFilter(((name, pattern),)) if pattern else None
    head, tail = pattern[: cuts[0]], pattern[cuts[-1] + 1 :]
    parts: list[Filter] = []
    if head:
        parts.append(PrefixFilter(((name, head),)))
    if tail:
        parts.append(SuffixFilter(((name, tail),)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else AllFilter(tuple(parts))
