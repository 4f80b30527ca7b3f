"""CESQL tokenizer (CESQL v1 §2 and the ANTLR lexer grammar).

Keywords, boolean literals and function names are case-insensitive; attribute names are
lower-cased. Strings take ``'...'`` or ``"..."``; inside them only ``\\'`` (resp. ``\\"``) is an
escape, every other backslash is literal text.

Signed integer literals: the grammar makes the sign part of the literal token, which would turn
``5-3`` into two adjacent literals (a syntax error). We read a sign as part of a literal only
where an operand is expected (at the start, after an operator, ``(``, ``,`` or a keyword such as
``NOT``); after an operand it is the binary operator. So ``5-3`` is ``5 - 3`` while
``-2147483648`` is still the smallest Integer literal and ``4 + -1`` is ``4 + (-1)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from cefilters.sql.errors import ParseError
from cefilters.sql.types import INT32_MAX, INT32_MIN

__all__ = ["KEYWORDS", "MAX_LENGTH", "Token", "TokenKind", "tokenize"]

MAX_LENGTH: Final = 4096
"""Longest accepted expression, in characters."""

TokenKind = Literal["int", "string", "name", "keyword", "op", "(", ")", ",", "end"]

KEYWORDS: Final = frozenset({"AND", "OR", "XOR", "NOT", "LIKE", "EXISTS", "IN", "TRUE", "FALSE"})

_WHITESPACE: Final = frozenset(" \t\r\n")
_WORD_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_DIGITS: Final = frozenset("0123456789")
# Longest first, so that "<=" is not read as "<" followed by "=".
_OPERATORS: Final = ("!=", "<>", ">=", "<=", "=", "<", ">", "*", "/", "%", "+", "-")
_PUNCTUATION: Final[dict[str, TokenKind]] = {"(": "(", ")": ")", ",": ","}
# After one of these an operand has just ended, so a following sign is a binary operator.
_OPERAND_ENDS: Final = frozenset({"int", "string", "name", ")"})


@dataclass(frozen=True, slots=True)
class Token:
    """One token. ``text`` is the upper-cased keyword, the operator, the name as written, or the
    decoded string literal; ``value`` holds an integer literal's value."""

    kind: TokenKind
    text: str
    position: int
    value: int = 0


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an ``end`` token; raises ``ParseError``."""
    if len(text) > MAX_LENGTH:
        raise ParseError(text, MAX_LENGTH, f"expression is longer than {MAX_LENGTH} characters")
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            i += 1
            continue
        operand_expected = not tokens or (
            tokens[-1].kind not in _OPERAND_ENDS
            and not (tokens[-1].kind == "keyword" and tokens[-1].text in ("TRUE", "FALSE"))
        )
        if c in "+-" and operand_expected and i + 1 < n and text[i + 1] in _DIGITS:
            end = _word_end(text, i + 1)
            if all(d in _DIGITS for d in text[i + 1 : end]):
                tokens.append(_integer(text, i, end))
                i = end
                continue
        if c in _WORD_CHARS:
            end = _word_end(text, i)
            tokens.append(_word(text, i, end))
            i = end
        elif c in "'\"":
            token, i = _string(text, i)
            tokens.append(token)
        elif c in _PUNCTUATION:
            tokens.append(Token(_PUNCTUATION[c], c, i))
            i += 1
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, i)), None)
            if op is None:
                raise ParseError(text, i, f"unexpected character {c!r}")
            tokens.append(Token("op", op, i))
            i += len(op)
    tokens.append(Token("end", "", n))
    return tokens


def _word_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] in _WORD_CHARS:
        end += 1
    return end


def _word(text: str, start: int, end: int) -> Token:
    word = text[start:end]
    if all(d in _DIGITS for d in word):
        return _integer(text, start, end)
    upper = word.upper()
    if upper in KEYWORDS:
        return Token("keyword", upper, start)
    return Token("name", word, start)


def _integer(text: str, start: int, end: int) -> Token:
    literal = text[start:end]
    # Length first: no bignum conversion of a 4000-digit literal.
    digits = literal.lstrip("+-").lstrip("0")
    value = int(literal) if len(digits) <= 10 else INT32_MAX + 1
    if not INT32_MIN <= value <= INT32_MAX:
        raise ParseError(text, start, f"integer literal {literal} does not fit in 32 bits")
    return Token("int", literal, start, value)


def _string(text: str, start: int) -> tuple[Token, int]:
    """Read a quoted string starting at ``start``; returns the token and the index after it."""
    quote = text[start]
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] == quote:
            chars.append(quote)
            i += 2
        elif c == quote:
            return Token("string", "".join(chars), start), i + 1
        else:
            chars.append(c)
            i += 1
    raise ParseError(text, start, "unterminated string literal")
