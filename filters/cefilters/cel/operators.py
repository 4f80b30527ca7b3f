"""CEL's operators over this package's value model: arithmetic with CEL's overflow and
division rules, ``in``, and the relations. Each raises :class:`CelEvaluationError` on a
type pair CEL does not define ("no such overload")."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Final

from .budget import CelEvaluationError
from .values import UInt, check_int, check_uint, compare, equal, type_name

__all__ = ["ARITHMETIC", "RELATIONS", "negate", "not_"]

Operator = Callable[[object, object], object]


def _overload(symbol: str, left: object, right: object) -> CelEvaluationError:
    return CelEvaluationError(f"no such overload: {type_name(left)} {symbol} {type_name(right)}")


def _add(left: object, right: object) -> object:
    # The sizes of strings, bytes and lists are checked by the compiled node, which knows the budget.
    if type(left) is int and type(right) is int:
        return check_int(left + right)
    if type(left) is str and type(right) is str:
        return left + right
    if type(left) is float and type(right) is float:
        return left + right
    if isinstance(left, UInt) and isinstance(right, UInt):
        return check_uint(left + right)
    if isinstance(left, bytes) and isinstance(right, bytes):
        return left + right
    if isinstance(left, list) and isinstance(right, list):
        return left + right
    if isinstance(left, datetime.timedelta) and isinstance(right, datetime.timedelta):
        return left + right
    if isinstance(left, datetime.datetime) and isinstance(right, datetime.timedelta):
        return left + right
    if isinstance(left, datetime.timedelta) and isinstance(right, datetime.datetime):
        return right + left
    raise _overload("+", left, right)


def _subtract(left: object, right: object) -> object:
    if type(left) is int and type(right) is int:
        return check_int(left - right)
    if type(left) is float and type(right) is float:
        return left - right
    if isinstance(left, UInt) and isinstance(right, UInt):
        return check_uint(left - right)
    if isinstance(left, datetime.datetime) and isinstance(right, datetime.datetime):
        return left - right
    if isinstance(left, datetime.datetime | datetime.timedelta) and isinstance(right, datetime.timedelta):
        return left - right
    raise _overload("-", left, right)


def _multiply(left: object, right: object) -> object:
    if type(left) is int and type(right) is int:
        return check_int(left * right)
    if type(left) is float and type(right) is float:
        return left * right
    if isinstance(left, UInt) and isinstance(right, UInt):
        return check_uint(left * right)
    raise _overload("*", left, right)


def _truncated(left: int, right: int) -> int:
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def _divide(left: object, right: object) -> object:
    if type(left) is int and type(right) is int:
        if right == 0:
            raise CelEvaluationError("divide by zero")
        return check_int(_truncated(left, right))
    if type(left) is float and type(right) is float:
        if right == 0.0:
            return float("nan") if left == 0.0 or left != left else float("inf") * (1 if left > 0 else -1)
        return left / right
    if isinstance(left, UInt) and isinstance(right, UInt):
        if right == 0:
            raise CelEvaluationError("divide by zero")
        return UInt(left // right)
    raise _overload("/", left, right)


def _modulo(left: object, right: object) -> object:
    if type(left) is int and type(right) is int:
        if right == 0:
            raise CelEvaluationError("modulus by zero")
        return left - right * _truncated(left, right)
    if isinstance(left, UInt) and isinstance(right, UInt):
        if right == 0:
            raise CelEvaluationError("modulus by zero")
        return UInt(left % right)
    raise _overload("%", left, right)


def _in(item: object, container: object) -> bool:
    if isinstance(container, list):
        return any(equal(item, member) for member in container)
    if isinstance(container, dict):
        if type(item) in (str, int, UInt, bool):
            return item in container and any(equal(item, key) for key in container if key == item)
        return False
    raise _overload("in", item, container)


def _less(left: object, right: object) -> bool:
    if type(left) is int and type(right) is int:
        return left < right
    if type(left) is str and type(right) is str:
        return left < right
    return compare(left, right) < 0


def _less_equal(left: object, right: object) -> bool:
    if type(left) is int and type(right) is int:
        return left <= right
    if type(left) is str and type(right) is str:
        return left <= right
    return compare(left, right) <= 0


def _greater(left: object, right: object) -> bool:
    if type(left) is int and type(right) is int:
        return left > right
    if type(left) is str and type(right) is str:
        return left > right
    return compare(left, right) > 0


def _greater_equal(left: object, right: object) -> bool:
    if type(left) is int and type(right) is int:
        return left >= right
    if type(left) is str and type(right) is str:
        return left >= right
    return compare(left, right) >= 0


def _equal(left: object, right: object) -> bool:
    if type(left) is type(right) and (type(left) is str or type(left) is int):
        return left == right
    return equal(left, right)


def _not_equal(left: object, right: object) -> bool:
    return not _equal(left, right)


ARITHMETIC: Final[dict[str, Operator]] = {
    "addition_add": _add,
    "addition_sub": _subtract,
    "multiplication_mul": _multiply,
    "multiplication_div": _divide,
    "multiplication_mod": _modulo,
}
"""Binary arithmetic, keyed by the grammar rule that names the operator."""

RELATIONS: Final[dict[str, Operator]] = {
    "relation_lt": _less,
    "relation_le": _less_equal,
    "relation_gt": _greater,
    "relation_ge": _greater_equal,
    "relation_eq": _equal,
    "relation_ne": _not_equal,
    "relation_in": _in,
}
"""The relations, keyed by the grammar rule that names the operator."""


def negate(value: object) -> object:
    """Unary ``-``."""
    if type(value) is int:
        return check_int(-value)
    if type(value) is float:
        return -value
    if isinstance(value, datetime.timedelta):
        return -value
    raise CelEvaluationError(f"no such overload: -{type_name(value)}")


def not_(value: object) -> bool:
    """Unary ``!``."""
    if value is True or value is False:
        return not value
    raise CelEvaluationError(f"no such overload: !{type_name(value)}")
