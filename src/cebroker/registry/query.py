"""The ``?inline`` and ``?filter`` request flags: parsing and evaluation.

Paths in both flags are dot-separated and relative to the entity (or the entities of the
collection) the request addresses.

``inline``: ``a.b`` inlines ``a`` and ``a.b``; ``a.*`` and ``*`` inline everything below (but
``*`` alone never inlines ``model``, ``capabilities`` or ``modelsource``).

``filter``: one ``filter`` value is an AND of comma-separated expressions; several ``filter``
parameters are OR-ed. An expression is ``[path.]attr`` (present), ``attr=null`` (absent) or
``attr <op> value`` with ``=``, ``!=``/``<>``, ``<``, ``<=``, ``>``, ``>=``. String comparisons
ignore case and ``*`` is a wildcard with ``=`` and ``!=``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cebroker.registry.errors import XRegistryError

ROOT_ONLY_INLINES = frozenset({"model", "capabilities", "modelsource"})


class Inline:
    """A parsed ``?inline`` value."""

    def __init__(self, paths: Sequence[tuple[str, ...]]) -> None:
        self.paths = list(paths)

    @classmethod
    def parse(cls, values: Sequence[str]) -> Inline:
        """Parse every ``inline`` parameter value (``?inline`` alone means ``*``)."""
        paths: list[tuple[str, ...]] = []
        for value in values:
            for part in value.split(",") if value else ["*"]:
                part = part.strip()
                if not part:
                    continue
                segs = tuple(part.split("."))
                if any(not s for s in segs) or "*" in segs[:-1]:
                    raise XRegistryError("bad_inline", inline=part)
                paths.append(segs)
        return cls(paths)

    def wants(self, path: tuple[str, ...]) -> bool:
        """True when the collection or attribute at ``path`` is to be inlined."""
        for p in self.paths:
            if p[-1] == "*":
                head = p[:-1]
                below = path[: len(head)] == head and len(path) > len(head)
                if below and (head or path[0] not in ROOT_ONLY_INLINES):
                    return True
            elif p[: len(path)] == path:
                return True
        return False

    def validate(self, known: set[tuple[str, ...]]) -> None:
        """``bad_inline`` for a path that names nothing inlinable (``known`` are the valid paths)."""
        for p in self.paths:
            target = p[:-1] if p[-1] == "*" else p
            if target and target not in known:
                raise XRegistryError("bad_inline", inline=".".join(p))


_EXPR = re.compile(r"^([A-Za-z0-9_.$*-]+?)\s*(<=|>=|!=|<>|=|<|>)(.*)$")


@dataclass(frozen=True, slots=True)
class Expr:
    """One filter expression; ``path`` is the dotted left side, split."""

    path: tuple[str, ...]
    op: str | None
    value: str | None

    def shifted(self) -> Expr:
        """The expression relative to a child (its first path segment consumed)."""
        return Expr(self.path[1:], self.op, self.value)

    def test(self, attrs: Mapping[str, Any]) -> bool:
        """Evaluate against an entity's attributes (the rest of ``path`` walks into maps)."""
        value: Any = attrs
        for seg in self.path:
            if not isinstance(value, Mapping) or seg not in value:
                value = None
                break
            value = value[seg]
        if self.op is None:
            return value is not None
        if self.value == "null":
            return (value is None) == (self.op == "=")
        if value is None or isinstance(value, (dict, list)):
            return self.op in ("!=", "<>") and value is None
        return _compare(value, self.op, self.value or "")


def _compare(value: Any, op: str, want: str) -> bool:
    if isinstance(value, bool):
        got: Any = "true" if value else "false"
    else:
        got = value
    if isinstance(got, (int, float)):
        try:
            num = float(want)
        except ValueError:
            return op in ("!=", "<>")
        return _ordered(float(got), op, num)
    text, pattern = str(got).lower(), want.lower()
    if op in ("=", "!=", "<>") and "*" in pattern:
        hit = fnmatch.fnmatchcase(text, pattern.replace("[", "[[]").replace("?", "[?]"))
        return hit if op == "=" else not hit
    return _ordered(text, op, pattern)


def _ordered(a: Any, op: str, b: Any) -> bool:
    if op == "=":
        return bool(a == b)
    if op in ("!=", "<>"):
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


Branch = tuple[Expr, ...]


def parse_filters(values: Sequence[str]) -> list[Branch]:
    """Every ``filter`` parameter as one AND-branch; no filter is one empty branch."""
    branches: list[Branch] = []
    for value in values:
        exprs = []
        for part in value.split(","):
            part = part.strip()
            if not part:
                raise XRegistryError("bad_filter", filter=value)
            m = _EXPR.match(part)
            if m is None:
                if not re.fullmatch(r"[A-Za-z0-9_.$-]+", part):
                    raise XRegistryError("bad_filter", filter=part)
                exprs.append(Expr(tuple(part.split(".")), None, None))
            else:
                lhs, op, rhs = m.group(1), m.group(2), m.group(3)
                if "*" in lhs:
                    raise XRegistryError("bad_filter", filter=part)
                exprs.append(Expr(tuple(lhs.split(".")), op, rhs))
        branches.append(tuple(exprs))
    return branches or [()]


def split_branch(branch: Branch, children: set[str]) -> tuple[list[Expr], dict[str, list[Expr]]]:
    """Separate a branch into expressions on the entity itself and per child collection."""
    own: list[Expr] = []
    nested: dict[str, list[Expr]] = {}
    for expr in branch:
        if len(expr.path) > 1 and expr.path[0] in children:
            nested.setdefault(expr.path[0], []).append(expr.shifted())
        else:
            own.append(expr)
    return own, nested
