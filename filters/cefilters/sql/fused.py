"""Attribute reads fused with a test against a constant, the shape of most filter conditions.

``type = 'com.example'``, ``source LIKE '/shop/%'``, ``priority > 5``: one closure reads the
attribute, casts it only when it is not already of the constant's type, and applies a C-level
test (a bound method of the constant such as ``'com.example'.__eq__``, or ``str.startswith``
through ``methodcaller``), instead of a closure for the read plus one for the operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from cefilters.sql.compiled import SHORT_DIGITS, Evaluator, Event
from cefilters.sql.like import LikePattern
from cefilters.sql.types import INT32_MAX, INT32_MIN, Type, attribute_value, to_bool, to_int, to_str

__all__ = ["ORDERING_TESTS", "attribute_like", "attribute_test"]

# "attribute OP constant" as a method of the constant: a < c is c > a, and so on.
ORDERING_TESTS: Final[dict[str, str]] = {
    "<": "__gt__",
    "<=": "__ge__",
    ">": "__lt__",
    ">=": "__le__",
    "=": "__eq__",
    "!=": "__ne__",
    "<>": "__ne__",
}


def attribute_test(
    name: str, target: Type, test: Callable[[Any], object], negated: bool = False
) -> Evaluator:
    """``test(attribute cast to target)``, negated when asked. ``test`` takes a value of
    ``target``'s type (``str``, ``int`` or ``bool``, hence ``Any``) and returns a bool."""
    if target is Type.STRING:

        def string_test(event: Event) -> bool:
            raw = event.get(name)
            if type(raw) is not str:
                raw = to_str(attribute_value(name, raw))
            return test(raw) is not negated

        return string_test
    if target is Type.INTEGER:

        def integer_test(event: Event) -> bool:
            raw = event.get(name)
            if type(raw) is not int or not INT32_MIN <= raw <= INT32_MAX:
                if type(raw) is str and len(raw) <= SHORT_DIGITS and raw.isdigit() and raw.isascii():
                    raw = int(raw)
                else:
                    raw = to_int(attribute_value(name, raw))
            return test(raw) is not negated

        return integer_test

    def boolean_test(event: Event) -> bool:
        raw = event.get(name)
        if raw is not True and raw is not False:
            raw = to_bool(attribute_value(name, raw))
        return test(raw) is not negated

    return boolean_test


def attribute_like(name: str, pattern: LikePattern, negated: bool) -> Evaluator:
    """``attribute [NOT] LIKE pattern``; prefix and suffix patterns get ``startswith`` and
    ``endswith`` inline."""
    literal = pattern.literal
    if pattern.shape == "prefix":

        def prefix_test(event: Event) -> bool:
            raw = event.get(name)
            if type(raw) is not str:
                raw = to_str(attribute_value(name, raw))
            return raw.startswith(literal) is not negated

        return prefix_test
    if pattern.shape == "suffix":

        def suffix_test(event: Event) -> bool:
            raw = event.get(name)
            if type(raw) is not str:
                raw = to_str(attribute_value(name, raw))
            return raw.endswith(literal) is not negated

        return suffix_test
    test = literal.__eq__ if pattern.shape == "exact" else pattern.match
    return attribute_test(name, Type.STRING, test, negated)
