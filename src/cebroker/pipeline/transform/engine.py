"""The CEL engine transformations run on, behind the interface of ``cefilters.cel``.

Everything else in :mod:`cebroker.pipeline.transform` imports the engine from here and only
through these names: :class:`Budget`, :func:`compile_cel`, :class:`CelProgram`,
:class:`CelEvaluationError` and :class:`BudgetExceeded`. Compiling raises
:class:`cefilters.errors.FilterError` (syntax errors, static cost over the budget); evaluating
takes and returns plain JSON-like Python values and raises :class:`CelEvaluationError` (with a
reason and, when known, a position in the expression).

This stand-in evaluates with cel-python and bounds only what it can: the expression's length at
compile time, and the result's size and nesting after evaluation. cel-python cannot bound the
steps of an evaluation; the bounded evaluator of ``cefilters.cel`` replaces this module (the
names above are its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cefilters.dialects.cel import _error_summary, environment
from cefilters.dialects.cel import compile_cel as compile_cel_filter

__all__ = ["Budget", "BudgetExceeded", "CelEvaluationError", "CelProgram", "compile_cel"]


@dataclass(frozen=True, slots=True)
class Budget:
    """What one evaluation may spend: steps, bytes of any value it builds, nesting depth."""

    max_steps: int = 100_000
    max_output_bytes: int = 1 << 20
    max_depth: int = 32


class CelEvaluationError(Exception):
    """An evaluation that failed: ``reason`` in a few words, ``position`` in the expression
    when the engine knows it."""

    def __init__(self, reason: str, position: object = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position


class BudgetExceeded(CelEvaluationError):
    """An evaluation stopped because it went over its :class:`Budget`."""


class CelProgram:
    """A compiled expression: evaluate it any number of times."""

    __slots__ = ("_budget", "_program", "text")

    def __init__(self, text: str, program: Any, budget: Budget) -> None:
        self.text = text
        self._program = program
        self._budget = budget

    def evaluate(self, variables: Mapping[str, object]) -> object:
        """The expression's value for ``variables`` (JSON-like values and bytes)."""
        from celpy.evaluation import CELEvalError

        try:
            activation = {name: _to_cel(value) for name, value in variables.items()}
            result = self._program.evaluate(activation)
        except CelEvaluationError:
            raise
        except RecursionError:
            raise BudgetExceeded("nested too deeply") from None
        except Exception as error:  # celpy raises CELEvalError and, on odd values, TypeErrors
            raise CelEvaluationError(_error_summary(error)) from None
        if isinstance(result, CELEvalError):  # celpy hands some errors back as the value
            raise CelEvaluationError(_error_summary(result))
        return _from_cel(result, self._budget, 0, [0])


def compile_cel(text: str, *, budget: Budget | None = None) -> CelProgram:
    """Compile ``text`` once; raises FilterError (path ``""``) when it is not valid CEL."""
    checked = compile_cel_filter(text, "")  # length, syntax and static errors, worded once
    del checked
    env = environment()
    return CelProgram(text, env.program(env.compile(text)), budget or Budget())


def _to_cel(value: Any) -> Any:
    from celpy.adapter import json_to_cel
    from celpy.celtypes import BytesType, ListType, MapType, StringType

    if isinstance(value, bytes | bytearray):
        return BytesType(bytes(value))
    if isinstance(value, Mapping):
        return MapType({StringType(str(k)): _to_cel(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return ListType([_to_cel(v) for v in value])
    return json_to_cel(value)


def _from_cel(value: object, budget: Budget, depth: int, size: list[int]) -> object:
    """A CEL value as plain Python, within the budget's depth and size (``size`` counts the
    bytes of the JSON text the value would take, roughly, as it is walked)."""
    from celpy import celtypes
    from celpy.evaluation import CELEvalError

    if isinstance(value, CELEvalError):  # an error held inside a map or list
        raise CelEvaluationError(_error_summary(value))
    if depth > budget.max_depth:
        raise BudgetExceeded(f"the result is nested deeper than {budget.max_depth} levels")
    size[0] += 2
    if size[0] > budget.max_output_bytes:
        raise BudgetExceeded(f"the result is larger than {budget.max_output_bytes} bytes")
    if value is None or isinstance(value, celtypes.NullType):
        return None
    if isinstance(value, celtypes.BoolType | bool):
        return bool(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType | int):
        size[0] += 20
        return int(value)
    if isinstance(value, celtypes.DoubleType | float):
        size[0] += 24
        return float(value)
    if isinstance(value, celtypes.BytesType | bytes):
        size[0] += len(value) * 4 // 3
        if size[0] > budget.max_output_bytes:
            raise BudgetExceeded(f"the result is larger than {budget.max_output_bytes} bytes")
        return bytes(value)
    if isinstance(value, celtypes.StringType | str):
        size[0] += len(value)
        if size[0] > budget.max_output_bytes:
            raise BudgetExceeded(f"the result is larger than {budget.max_output_bytes} bytes")
        return str(value)
    if isinstance(value, celtypes.TimestampType | celtypes.DurationType):
        text = str(value)
        size[0] += len(text)
        return text
    if isinstance(value, celtypes.MapType | dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CelEvaluationError("a map in the result has a key that is not a string")
            size[0] += len(key) + 3
            out[str(key)] = _from_cel(item, budget, depth + 1, size)
        return out
    if isinstance(value, celtypes.ListType | list):
        return [_from_cel(item, budget, depth + 1, size) for item in value]
    raise CelEvaluationError(f"the result holds a value of type {type(value).__name__}")
