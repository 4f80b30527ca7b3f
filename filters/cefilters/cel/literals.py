"""CEL literal tokens (cel-python's lexer) to this package's values."""

from __future__ import annotations

import lark

from .values import INT_MAX, INT_MIN, UINT_MAX, UInt

__all__ = ["literal"]


def _integer(text: str) -> int:
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    value = int(digits[2:], 16) if digits[:2].lower() == "0x" else int(digits, 10)
    return -value if negative else value


def literal(token: lark.Token) -> object:
    """The value a literal token denotes; raises ValueError when it is out of range."""
    from celpy.evaluation import celbytes, celstr  # deferred: cel-python loads only with CEL

    kind, text = token.type, str(token)
    if kind == "INT_LIT":
        value = _integer(text)
        if not INT_MIN <= value <= INT_MAX:
            raise ValueError(f"{text} does not fit a 64-bit int")
        return value
    if kind == "UINT_LIT":
        value = _integer(text[:-1])
        if not 0 <= value <= UINT_MAX:
            raise ValueError(f"{text} does not fit a 64-bit uint")
        return UInt(value)
    if kind == "FLOAT_LIT":
        return float(text)
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return str.__str__(celstr(token))
    if kind == "BYTES_LIT":
        return bytes(celbytes(token))
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    raise ValueError(f"unknown literal {kind}")
