"""``config.transform``: what a subscription's transformation is, checked when it is saved.

The one accepted form is ``{"cel": "<expression>"}``. The expression is compiled once per
subscription revision with the transformations' :data:`BUDGET`; one that does not compile (a
syntax error, or a static cost over the budget) is refused with the engine's reason and
position, so nothing that cannot run is ever stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from cefilters.errors import FilterError

from cebroker.pipeline.transform.engine import Budget, CelProgram, compile_cel
from cebroker.pipeline.transform.shaped import Plan, plan_of

__all__ = [
    "BUDGET",
    "CONFIG_KEY",
    "Transformation",
    "TransformSpecError",
    "parse_transform",
    "transform_problems",
]

#: The ``config`` member that holds a subscription's transformation.
CONFIG_KEY: Final = "transform"

#: What one evaluation of a transformation may spend (docs/transformations.md, "Limits"): the
#: steps of the evaluation, the bytes of any value it builds (the outgoing event included) and
#: the nesting of the values.
BUDGET: Final = Budget(max_steps=10_000, max_output_bytes=256 * 1024, max_depth=32)


class TransformSpecError(ValueError):
    """A ``config.transform`` value that cannot be used; ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Transformation:
    """A compiled transformation: the expression's text, its program and, when the expression's
    top level is a map literal with constant keys, its fast path (:mod:`.shaped`)."""

    text: str
    program: CelProgram
    plan: Plan | None = None


def parse_transform(value: Any) -> Transformation:
    """Compile a ``config.transform`` value; raises :class:`TransformSpecError`."""
    if not isinstance(value, dict):
        raise TransformSpecError('must be an object {"cel": "<expression>"}')
    unknown = sorted(str(name) for name in value if name != "cel")
    if unknown:
        raise TransformSpecError(f'unknown member {unknown[0]!r}; the transformation is {{"cel": ...}}')
    text = value.get("cel")
    if not isinstance(text, str):
        raise TransformSpecError('"cel" must be a string holding a CEL expression')
    try:
        program = compile_cel(text, budget=BUDGET)
    except FilterError as error:
        raise TransformSpecError(f"cel: {error.message}") from None
    return Transformation(text, program, plan_of(program))


def transform_problems(value: Any) -> list[str]:
    """What is wrong with a ``config.transform`` value (empty when it compiles)."""
    try:
        parse_transform(value)
    except TransformSpecError as error:
        return [error.message]
    return []
