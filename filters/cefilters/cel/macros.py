"""CEL's macros (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) and the per-evaluation
:class:`Frame` they count their steps in.

A macro iterates over a list's members or a map's keys. Each iteration adds the steps of its
body (known when it was compiled) to the frame's count and stops the evaluation with
:class:`BudgetExceeded` once the count passes the budget: this is what bounds nested macros,
whose cost multiplies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from .budget import Budget, BudgetExceeded, CelEvaluationError, Position
from .values import type_name

__all__ = ["MACROS", "SCAN_UNIT", "Frame", "MacroParts"]


SCAN_UNIT: Final = 1024
"""Characters a text-searching function (``contains``, ``matches``, ``startsWith``,
``endsWith``) reads per step it counts: reading 1 MiB costs 1,024 steps."""


class Frame:
    """One evaluation's state: the variables, the macro variables in scope, the steps spent."""

    __slots__ = ("built", "locals", "max_built", "max_steps", "steps", "variables")

    def __init__(self, variables: Mapping[str, object], budget: Budget) -> None:
        self.variables = variables
        self.locals: dict[str, object] = {}
        self.steps = 0
        self.max_steps = budget.max_steps
        self.built = 0
        self.max_built = budget.max_output_bytes

    def scan(self, length: int, position: Position | None) -> None:
        """Count the steps of reading ``length`` characters (one per :data:`SCAN_UNIT`): a macro
        that searches a long attribute on every iteration is stopped like any other."""
        self.steps += length // SCAN_UNIT
        if self.steps > self.max_steps:
            raise BudgetExceeded(f"over the budget of {self.max_steps} steps", position)

    def build(self, amount: int, position: Position | None) -> None:
        """Count ``amount`` more bytes built by this evaluation; over the budget, stop it."""
        self.built += amount
        if self.built > self.max_built:
            raise BudgetExceeded(
                f"over the budget of {self.max_built} bytes built by one evaluation", position
            )


Run = Callable[[Frame], object]


@dataclass(frozen=True, slots=True)
class MacroParts:
    """A compiled macro call: ``target.name(variable, *bodies)``; ``cost`` is one iteration's."""

    name: str
    variable: str
    target: Run
    bodies: tuple[Run, ...]
    cost: int
    position: Position | None


def _members(value: object, parts: MacroParts) -> list[object]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        return list(value)
    raise CelEvaluationError(f"no such overload: {type_name(value)}.{parts.name}()", parts.position)


def _iterate(parts: MacroParts, frame: Frame) -> tuple[list[object], object]:
    """The members to visit and the previous binding of the variable (restored by the caller)."""
    members = _members(parts.target(frame), parts)
    return members, frame.locals.get(parts.variable, _UNBOUND)


_UNBOUND: Final = object()


def _step(parts: MacroParts, frame: Frame) -> None:
    frame.steps += parts.cost
    if frame.steps > frame.max_steps:
        raise BudgetExceeded(f"over the budget of {frame.max_steps} steps", parts.position)


def _restore(frame: Frame, variable: str, previous: object) -> None:
    if previous is _UNBOUND:
        frame.locals.pop(variable, None)
    else:
        frame.locals[variable] = previous


def _predicate(value: object, parts: MacroParts) -> bool:
    if value is True or value is False:
        return value
    raise CelEvaluationError(
        f"{parts.name}(): the predicate is a {type_name(value)}, not a bool", parts.position
    )


def _quantifier(parts: MacroParts, budget: Budget) -> Run:
    """``all`` (stops at the first false) or ``exists`` (at the first true); an error counts
    only when nothing decides, as for ``&&`` and ``||``."""
    (body,) = parts.bodies
    deciding = parts.name == "exists"

    def quantify(frame: Frame) -> object:
        members, previous = _iterate(parts, frame)
        failure: CelEvaluationError | None = None
        try:
            for member in members:
                _step(parts, frame)
                frame.locals[parts.variable] = member
                try:
                    value = _predicate(body(frame), parts)
                except BudgetExceeded:
                    raise
                except CelEvaluationError as error:
                    failure = failure or error
                    continue
                if value is deciding:
                    return deciding
        finally:
            _restore(frame, parts.variable, previous)
        if failure is not None:
            raise failure
        return not deciding

    return quantify


def _exists_one(parts: MacroParts, budget: Budget) -> Run:
    (body,) = parts.bodies

    def exists_one(frame: Frame) -> object:
        members, previous = _iterate(parts, frame)
        found = 0
        try:
            for member in members:
                _step(parts, frame)
                frame.locals[parts.variable] = member
                found += _predicate(body(frame), parts)
        finally:
            _restore(frame, parts.variable, previous)
        return found == 1

    return exists_one


def _map(parts: MacroParts, budget: Budget) -> Run:
    """``map(x, e)`` and ``map(x, p, e)`` (only members where ``p`` holds)."""
    transform = parts.bodies[-1]
    keep = parts.bodies[0] if len(parts.bodies) == 2 else None

    def map_(frame: Frame) -> object:
        members, previous = _iterate(parts, frame)
        result: list[object] = []
        try:
            for member in members:
                _step(parts, frame)
                frame.locals[parts.variable] = member
                if keep is not None and not _predicate(keep(frame), parts):
                    continue
                frame.build(8, parts.position)
                result.append(transform(frame))
        finally:
            _restore(frame, parts.variable, previous)
        return result

    return map_


def _filter(parts: MacroParts, budget: Budget) -> Run:
    (body,) = parts.bodies

    def filter_(frame: Frame) -> object:
        members, previous = _iterate(parts, frame)
        result: list[object] = []
        try:
            for member in members:
                _step(parts, frame)
                frame.locals[parts.variable] = member
                if _predicate(body(frame), parts):
                    frame.build(8, parts.position)
                    result.append(member)
        finally:
            _restore(frame, parts.variable, previous)
        return result

    return filter_


MACROS: Final[dict[str, Callable[[MacroParts, Budget], Run]]] = {
    "all": _quantifier,
    "exists": _quantifier,
    "exists_one": _exists_one,
    "map": _map,
    "filter": _filter,
}
"""The macros by name; each builds the closure that runs one call."""
