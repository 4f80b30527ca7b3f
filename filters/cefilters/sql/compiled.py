"""Building blocks of compiled expressions: the ``Compiled`` record, constants, attribute
getters, casts to a parameter type, and compile-time constant folding."""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

from cefilters.sql.errors import EvaluationFailure
from cefilters.sql.types import INT32_MAX, INT32_MIN, Type, Value, attribute_value, to_bool, to_int, to_str

__all__ = [
    "SHORT_DIGITS",
    "Compiled",
    "Event",
    "Evaluator",
    "as_boolean",
    "as_integer",
    "as_string",
    "as_type",
    "attribute",
    "constant",
    "finish",
]

T = TypeVar("T", bound=Value)

Event = Mapping[str, object]
Evaluator = Callable[[Event], Value]
"""A compiled (sub)expression: returns its value or raises ``EvaluationFailure``."""

_NO_EVENT: Final[Event] = {}


@dataclass(frozen=True, slots=True)
class Compiled:
    """A compiled subexpression.

    ``pure``: it does not read the event (nor call an impure function). ``value`` is set when
    the value is known at compile time (a pure subexpression that evaluated without error).
    ``attribute`` names the attribute when the subexpression is a bare attribute reference,
    so that a cast can be fused into the attribute read.
    """

    evaluate: Evaluator
    type: Type
    pure: bool = False
    value: Value | None = None
    attribute: str | None = None


def constant(value: Value) -> Compiled:
    """A literal."""
    type_ = (
        Type.BOOLEAN if isinstance(value, bool) else Type.INTEGER if isinstance(value, int) else Type.STRING
    )

    def literal(event: Event) -> Value:
        return value

    return Compiled(literal, type_, pure=True, value=value)


def finish(evaluate: Evaluator, type_: Type, pure: bool) -> Compiled:
    """Wrap a freshly built evaluator; a pure one is folded to its value when it has no error
    (an erroring one stays, so the error is raised at evaluation time as the spec wants)."""
    if pure:
        try:
            value = evaluate(_NO_EVENT)
        except EvaluationFailure:
            return Compiled(evaluate, type_, pure=True)
        return Compiled(constant(value).evaluate, type_, pure=True, value=value)
    return Compiled(evaluate, type_)


SHORT_DIGITS: Final = 9  # any run of up to 9 ASCII digits is a valid 32-bit Integer


def attribute(name: str) -> Compiled:
    """Read an attribute with its own type (Boolean, Integer or String).

    All attribute reads use ``event.get(name)``: an absent attribute and a null one (absent in
    the JSON format) both come back as ``None``, which ``attribute_value`` turns into the
    missingAttribute error, off the fast path and without a KeyError to catch.
    """

    def read(event: Event) -> Value:
        raw = event.get(name)
        if type(raw) is str:
            return raw
        return attribute_value(name, raw)

    return Compiled(read, Type.ANY, attribute=name)


def _read_string(name: str) -> Callable[[Event], str]:
    def read_string(event: Event) -> str:
        raw = event.get(name)
        if type(raw) is str:
            return raw
        return to_str(attribute_value(name, raw))

    return read_string


def _read_integer(name: str) -> Callable[[Event], int]:
    def read_integer(event: Event) -> int:
        raw = event.get(name)
        if type(raw) is int and INT32_MIN <= raw <= INT32_MAX:
            return raw
        if type(raw) is str:
            if len(raw) <= SHORT_DIGITS and raw.isdigit() and raw.isascii():
                return int(raw)
            return to_int(raw)
        return to_int(attribute_value(name, raw))

    return read_integer


def _read_boolean(name: str) -> Callable[[Event], bool]:
    def read_boolean(event: Event) -> bool:
        raw = event.get(name)
        if raw is True or raw is False:
            return raw
        if type(raw) is str:
            return to_bool(raw)
        return to_bool(attribute_value(name, raw))

    return read_boolean


def _typed(
    compiled: Compiled,
    target: Type,
    convert: Callable[[Value], T],
    read: Callable[[str], Callable[[Event], T]],
) -> Callable[[Event], T]:
    if compiled.type is target:
        # Statically of the target type already: the evaluator returns T.
        return typing.cast(Callable[[Event], T], compiled.evaluate)
    if compiled.value is not None:
        try:
            value = convert(compiled.value)
        except EvaluationFailure:
            pass  # the cast error belongs to evaluation time: fall through to a runtime cast
        else:
            return lambda event: value
    if compiled.attribute is not None:
        return read(compiled.attribute)
    inner = compiled.evaluate
    return lambda event: convert(inner(event))


def as_string(compiled: Compiled) -> Callable[[Event], str]:
    """An evaluator of ``compiled`` cast to String (CESQL v1 §3.7 implicit casting)."""
    return _typed(compiled, Type.STRING, to_str, _read_string)


def as_integer(compiled: Compiled) -> Callable[[Event], int]:
    """An evaluator of ``compiled`` cast to Integer (CESQL v1 §3.7 implicit casting)."""
    return _typed(compiled, Type.INTEGER, to_int, _read_integer)


def as_boolean(compiled: Compiled) -> Callable[[Event], bool]:
    """An evaluator of ``compiled`` cast to Boolean (CESQL v1 §3.7 implicit casting)."""
    return _typed(compiled, Type.BOOLEAN, to_bool, _read_boolean)


def as_type(compiled: Compiled, target: Type) -> Evaluator:
    """An evaluator of ``compiled`` cast to ``target``; ``ANY`` leaves it as it is."""
    if target is Type.STRING:
        return as_string(compiled)
    if target is Type.INTEGER:
        return as_integer(compiled)
    if target is Type.BOOLEAN:
        return as_boolean(compiled)
    return compiled.evaluate
