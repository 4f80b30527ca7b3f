"""Compilation of the binary operators (CESQL v1 §3.4): logic, comparison and arithmetic.

A run of operators of one precedence level (``Chain``) compiles to one closure. The usual case,
a single operator, gets a dedicated closure; longer runs fold left to right in a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from cefilters.sql.ast import Chain
from cefilters.sql.compiled import Compiled, Evaluator, Event, as_boolean, as_integer, as_type, finish
from cefilters.sql.errors import EvaluationFailure
from cefilters.sql.fused import ORDERING_TESTS, attribute_test
from cefilters.sql.types import INT32_MAX, INT32_MIN, Type, Value, to_bool, to_int, to_str

__all__ = ["compile_chain", "equals"]

_LOGIC: Final = frozenset({"AND", "OR", "XOR"})
_EQUALITY: Final = frozenset({"=", "!=", "<>"})
_ORDERING: Final = frozenset({"<", "<=", ">", ">="})
_RUNTIME_TYPES: Final[dict[type, Type]] = {bool: Type.BOOLEAN, int: Type.INTEGER, str: Type.STRING}


def compile_chain(chain: Chain, operands: list[Compiled]) -> Compiled:
    """Compile ``operands[0] op operands[1] op ...`` (all operators of one level)."""
    first = chain.operators[0]
    pure = all(operand.pure for operand in operands)
    if first in _LOGIC:
        return finish(_logic(chain.operators, operands), Type.BOOLEAN, pure)
    if first in _EQUALITY or first in _ORDERING:
        if len(operands) == 2:
            return finish(_compare(first, operands[0], operands[1]), Type.BOOLEAN, pure)
        return finish(_comparison_run(chain.operators, operands), Type.BOOLEAN, pure)
    positions = chain.positions
    steps = [_arithmetic_step(op, position) for op, position in zip(chain.operators, positions, strict=True)]
    integers = [as_integer(operand) for operand in operands]
    if len(operands) == 2:
        step, left, right = steps[0], integers[0], integers[1]
        return finish(lambda event: step(left(event), right(event)), Type.INTEGER, pure)
    return finish(_fold(integers, steps), Type.INTEGER, pure)


# -- logic --------------------------------------------------------------------------------------


def _logic(operators: tuple[str, ...], operands: list[Compiled]) -> Evaluator:
    """AND / OR short-circuit (the right side is not evaluated when the left decides), XOR
    evaluates both sides (CESQL v1 §3.4.1)."""
    evaluators = [as_boolean(operand) for operand in operands]
    if len(set(operators)) == 1 and operators[0] != "XOR":
        if operators[0] == "AND":

            def all_true(event: Event) -> bool:
                return all(evaluate(event) for evaluate in evaluators)

            if len(evaluators) == 2:
                left, right = evaluators
                return lambda event: left(event) and right(event)
            return all_true

        def any_true(event: Event) -> bool:
            return any(evaluate(event) for evaluate in evaluators)

        if len(evaluators) == 2:
            left, right = evaluators
            return lambda event: left(event) or right(event)
        return any_true

    head, rest = evaluators[0], list(zip(operators, evaluators[1:], strict=True))

    def mixed(event: Event) -> bool:
        result = head(event)
        for operator, evaluate in rest:
            if operator == "AND":
                if result:
                    result = evaluate(event)
            elif operator == "OR":
                if not result:
                    result = evaluate(event)
            else:
                result = result != evaluate(event)
        return result

    return mixed


# -- comparison ---------------------------------------------------------------------------------


def equals(left: Value, right: Value) -> bool:
    """``=`` for runtime values: the right operand's type picks the overload, the left operand
    is cast to it (CESQL v1 §3.7: ``'TRUE' = true`` is true, ``true = 'TRUE'`` is false)."""
    if type(left) is type(right):
        return left == right
    if isinstance(right, bool):
        return to_bool(left) == right
    if isinstance(right, int):
        return to_int(left) == right
    return to_str(left) == right


def _compare(operator: str, left: Compiled, right: Compiled) -> Evaluator:
    if left.attribute is not None and right.value is not None:
        fused = _fused_comparison(operator, left.attribute, right.value)
        if fused is not None:
            return fused
    if operator in _ORDERING:
        return _ordering(operator, as_integer(left), as_integer(right))
    negate = operator != "="
    if right.value is not None:
        # A constant right side fixes the overload at compile time; the cast fuses into the left.
        cast_left, constant = as_type(left, _RUNTIME_TYPES[type(right.value)]), right.value
        if negate:
            return lambda event: cast_left(event) != constant
        return lambda event: cast_left(event) == constant
    # Evaluate the left operand first, then the right, then cast the left to the right's type.
    raw_left, raw_right = left.evaluate, right.evaluate
    if negate:
        return lambda event: not equals(raw_left(event), raw_right(event))
    return lambda event: equals(raw_left(event), raw_right(event))


def _fused_comparison(operator: str, name: str, constant: Value) -> Evaluator | None:
    """``attribute OP constant`` as one closure, when the constant's type is settled."""
    if operator in _ORDERING:
        try:
            constant = to_int(constant)
        except EvaluationFailure:
            return None  # the cast error must come after reading the attribute: no fusion
    target = _RUNTIME_TYPES[type(constant)]
    return attribute_test(name, target, getattr(constant, ORDERING_TESTS[operator]))


def _ordering(operator: str, left: Callable[[Event], int], right: Callable[[Event], int]) -> Evaluator:
    if operator == "<":
        return lambda event: left(event) < right(event)
    if operator == "<=":
        return lambda event: left(event) <= right(event)
    if operator == ">":
        return lambda event: left(event) > right(event)
    return lambda event: left(event) >= right(event)


_ORDERS: Final[dict[str, Callable[[int, int], bool]]] = {
    "<": int.__lt__,
    "<=": int.__le__,
    ">": int.__gt__,
    ">=": int.__ge__,
}


def _comparison_run(operators: tuple[str, ...], operands: list[Compiled]) -> Evaluator:
    """A longer run of comparisons (``1 = 1 = TRUE``), left to right, with the same order of
    evaluation and casts as a single comparison: an ordering casts its left operand before the
    right one is evaluated, an equality casts after (the right operand's type decides)."""
    head = operands[0].evaluate
    rest = list(zip(operators, [operand.evaluate for operand in operands[1:]], strict=True))

    def run(event: Event) -> bool:
        result = head(event)
        for operator, evaluate in rest:
            order = _ORDERS.get(operator)
            if order is not None:
                left = to_int(result)
                result = order(left, to_int(evaluate(event)))
            else:
                result = equals(result, evaluate(event)) is (operator == "=")
        return bool(result)

    return run


# -- arithmetic ---------------------------------------------------------------------------------


def _checked(result: int, operator: str, position: int) -> int:
    if INT32_MIN <= result <= INT32_MAX:
        return result
    raise EvaluationFailure(
        "math", f"integer overflow: {operator} at position {position} gives {result}, outside 32 bits"
    )


def _arithmetic_step(operator: str, position: int) -> Callable[[Value, Value], int]:
    """Integer arithmetic: 32-bit, overflow is a math error, ``/`` truncates toward zero and
    ``%`` takes the dividend's sign (Python's ``//`` and ``%`` floor instead)."""

    def add(left: Value, right: Value) -> int:
        return _checked(to_int(left) + to_int(right), "+", position)

    def subtract(left: Value, right: Value) -> int:
        return _checked(to_int(left) - to_int(right), "-", position)

    def multiply(left: Value, right: Value) -> int:
        return _checked(to_int(left) * to_int(right), "*", position)

    def divide(left: Value, right: Value) -> int:
        dividend, divisor = to_int(left), to_int(right)
        if divisor == 0:
            raise EvaluationFailure("math", f"division by zero at position {position}")
        quotient = abs(dividend) // abs(divisor)
        return _checked(-quotient if (dividend < 0) != (divisor < 0) else quotient, "/", position)

    def modulo(left: Value, right: Value) -> int:
        dividend, divisor = to_int(left), to_int(right)
        if divisor == 0:
            raise EvaluationFailure("math", f"modulo by zero at position {position}")
        remainder = abs(dividend) % abs(divisor)
        return -remainder if dividend < 0 else remainder

    steps: dict[str, Callable[[Value, Value], int]] = {
        "+": add,
        "-": subtract,
        "*": multiply,
        "/": divide,
        "%": modulo,
    }
    return steps[operator]


def _fold(
    evaluators: Sequence[Callable[[Event], Value]], steps: Sequence[Callable[[Value, Value], Value]]
) -> Evaluator:
    """Left-to-right evaluation of a run: ``((a op b) op c) ...``."""
    head = evaluators[0]
    rest = list(zip(steps, evaluators[1:], strict=True))

    def fold(event: Event) -> Value:
        result = head(event)
        for step, evaluate in rest:
            result = step(result, evaluate(event))
        return result

    return fold
