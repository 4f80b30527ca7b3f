"""CESQL parser: tokens -> syntax tree, by precedence climbing (CESQL v1 §2, §3.6).

Precedence, loosest first: ``AND``/``OR``/``XOR`` (one level, as in the spec, unlike SQL), then
comparisons, ``+ -``, ``* / %``, ``[NOT] IN``, ``[NOT] LIKE``, and the prefix operators ``NOT``
and ``-``, which bind only the operand right after them. Operators of one level associate to the
left (spec §3.6 "evaluated left to right"; the ANTLR grammar's right-associative logic rule is
not followed, see the docs).

Nesting is bounded (``MAX_DEPTH``) both in the parser's own recursion and in the height of the
resulting tree, so neither parsing nor the compiled closures can hit Python's recursion limit.
"""

from __future__ import annotations

from typing import Final

from cefilters.sql.ast import Attribute, Call, Chain, Exists, In, Like, Literal, Node, Unary
from cefilters.sql.errors import ParseError
from cefilters.sql.lexer import Token, tokenize

__all__ = ["MAX_DEPTH", "parse"]

MAX_DEPTH: Final = 64
"""Deepest accepted nesting of sub-expressions (parentheses, operators, calls)."""

_LOGIC, _COMPARE, _ADD, _MULTIPLY, _IN, _LIKE, _PREFIX = range(1, 8)

_BINARY_LEVELS: Final[dict[str, int]] = {
    "AND": _LOGIC,
    "OR": _LOGIC,
    "XOR": _LOGIC,
    "=": _COMPARE,
    "!=": _COMPARE,
    "<>": _COMPARE,
    "<": _COMPARE,
    "<=": _COMPARE,
    ">": _COMPARE,
    ">=": _COMPARE,
    "+": _ADD,
    "-": _ADD,
    "*": _MULTIPLY,
    "/": _MULTIPLY,
    "%": _MULTIPLY,
}

_Parsed = tuple[Node, int]  # a node and the height of its tree


def parse(text: str) -> Node:
    """Parse a CESQL expression; raises ``ParseError`` with the offending position."""
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = tokenize(text)
        self._index = 0
        self._depth = 0

    def parse(self) -> Node:
        if self._peek().kind == "end":
            raise self._error(self._peek(), "empty expression")
        node, _ = self._expression(0)
        token = self._peek()
        if token.kind != "end":
            raise self._error(token, f"unexpected {_describe(token)}")
        return node

    # -- helpers -------------------------------------------------------------------------------

    def _peek(self, ahead: int = 0) -> Token:
        return self._tokens[min(self._index + ahead, len(self._tokens) - 1)]

    def _next(self) -> Token:
        token = self._tokens[self._index]
        if token.kind != "end":
            self._index += 1
        return token

    def _expect(self, kind: str, what: str) -> Token:
        token = self._next()
        if token.kind != kind:
            raise self._error(token, f"expected {what}, found {_describe(token)}")
        return token

    def _error(self, token: Token, reason: str) -> ParseError:
        return ParseError(self._text, token.position, reason)

    def _checked(self, node: Node, height: int) -> _Parsed:
        if height > MAX_DEPTH:
            raise ParseError(
                self._text, node.position, f"expression is nested more than {MAX_DEPTH} levels deep"
            )
        return node, height

    # -- grammar -------------------------------------------------------------------------------

    def _expression(self, min_level: int) -> _Parsed:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise self._error(self._peek(), f"expression is nested more than {MAX_DEPTH} levels deep")
        try:
            left = self._prefix()
            while True:
                token = self._peek()
                level = self._infix_level(token)
                if level is None or level < min_level:
                    return left
                if level == _LIKE:
                    left = self._like(left)
                elif level == _IN:
                    left = self._in(left)
                else:
                    left = self._binary(left, level)
        finally:
            self._depth -= 1

    def _infix_level(self, token: Token) -> int | None:
        if token.kind == "op" or (token.kind == "keyword" and token.text in ("AND", "OR", "XOR")):
            return _BINARY_LEVELS[token.text]
        if token.kind != "keyword":
            return None
        keyword = token.text
        if keyword == "NOT":
            following = self._peek(1)
            keyword = following.text if following.kind == "keyword" else ""
        return {"LIKE": _LIKE, "IN": _IN}.get(keyword)

    def _binary(self, left: _Parsed, level: int) -> _Parsed:
        operator = self._next()
        right, right_height = self._expression(level + 1)
        node, height = left
        # Extending a chain of the same level keeps left-to-right evaluation and a flat tree.
        if isinstance(node, Chain) and _BINARY_LEVELS[node.operators[0]] == level:
            chain = Chain(
                (*node.operands, right),
                (*node.operators, operator.text),
                (*node.positions, operator.position),
            )
            return self._checked(chain, max(height, right_height + 1))
        chain = Chain((node, right), (operator.text,), (operator.position,))
        return self._checked(chain, max(height, right_height) + 1)

    def _negatable_keyword(self) -> tuple[bool, Token]:
        """Consume ``[NOT] LIKE`` or ``[NOT] IN``: whether NOT was there, and the keyword."""
        first = self._next()
        if first.text == "NOT":
            return True, self._next()
        return False, first

    def _like(self, left: _Parsed) -> _Parsed:
        negated, keyword = self._negatable_keyword()
        pattern = self._next()
        if pattern.kind != "string":
            raise self._error(pattern, f"LIKE needs a string literal pattern, found {_describe(pattern)}")
        node, height = left
        return self._checked(Like(node, pattern.text, negated, keyword.position), height + 1)

    def _in(self, left: _Parsed) -> _Parsed:
        negated, keyword = self._negatable_keyword()
        items, items_height = self._list("IN")
        if not items:
            raise self._error(keyword, "IN needs at least one value")
        node, height = left
        return self._checked(In(node, items, negated, keyword.position), max(height, items_height) + 1)

    def _list(self, what: str) -> tuple[tuple[Node, ...], int]:
        """A parenthesised, comma-separated list (possibly empty); ``what`` names it in errors."""
        self._expect("(", f"'(' after {what}")
        items: list[Node] = []
        height = 0
        if self._peek().kind == ")":
            self._next()
            return (), height
        while True:
            item, item_height = self._expression(0)
            items.append(item)
            height = max(height, item_height)
            token = self._next()
            if token.kind == ")":
                return tuple(items), height
            if token.kind != ",":
                raise self._error(token, f"expected ',' or ')' in {what}, found {_describe(token)}")

    def _prefix(self) -> _Parsed:
        token = self._next()
        kind = token.kind
        if kind == "int":
            return Literal(token.value, token.position), 1
        if kind == "string":
            return Literal(token.text, token.position), 1
        if kind == "name":
            if self._peek().kind == "(":
                return self._call(token)
            return self._attribute(token), 1
        if kind == "(":
            inner = self._expression(0)
            self._expect(")", "')'")
            return inner
        if kind == "keyword":
            if token.text in ("TRUE", "FALSE"):
                return Literal(token.text == "TRUE", token.position), 1
            if token.text == "NOT":
                return self._unary(token)
            if token.text == "EXISTS":
                name = self._expect("name", "an attribute name after EXISTS")
                return Exists(self._attribute(name).name, token.position), 1
        if kind == "op" and token.text == "-":
            return self._unary(token)
        if kind == "end":
            raise self._error(token, "unexpected end of expression")
        raise self._error(token, f"expected an expression, found {_describe(token)}")

    def _unary(self, operator: Token) -> _Parsed:
        operand, height = self._expression(_PREFIX)
        return self._checked(Unary(operator.text, operand, operator.position), height + 1)

    def _attribute(self, token: Token) -> Attribute:
        if not token.text.isalnum():
            raise self._error(token, f"invalid attribute name {token.text!r}: only letters and digits")
        return Attribute(token.text.lower(), token.position)

    def _call(self, name: Token) -> _Parsed:
        if not (name.text[0].isalpha() and name.text.replace("_", "").isalpha()):
            raise self._error(name, f"invalid function name {name.text!r}")
        args, height = self._list(f"the arguments of {name.text.upper()}")
        return self._checked(Call(name.text.upper(), args, name.position), height + 1)


def _describe(token: Token) -> str:
    if token.kind == "end":
        return "end of expression"
    if token.kind == "string":
        return "string literal"
    if token.kind == "int":
        return f"integer {token.text}"
    return repr(token.text)
