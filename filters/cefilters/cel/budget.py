"""The CEL evaluation budget and the errors a bounded program raises.

::

    ValueError
    └── FilterError                      (cefilters.errors)
        ├── CelSyntaxError               the text does not parse (position known)
        └── CelCostError                 the static cost estimate is over the budget
    Exception
    └── CelEvaluationError               a run-time error (reason, position when known)
        └── BudgetExceeded               the run-time budget ran out
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..errors import FilterError

__all__ = [
    "DEFAULT_BUDGET",
    "Budget",
    "BudgetExceeded",
    "CelCostError",
    "CelEvaluationError",
    "CelSyntaxError",
    "Position",
]

Position = tuple[int, int]
"""A place in the expression text: (line, column), both counted from 1."""


@dataclass(frozen=True, slots=True)
class Budget:
    """What one evaluation may spend. Checked twice: statically when the text is compiled (an
    estimate over ``max_steps`` or an expression nested deeper than ``max_depth`` is refused),
    and while it runs (a run that goes over raises :class:`BudgetExceeded`).

    Attributes:
        max_steps: operations one evaluation may perform. An expression without macros costs
            one step per operation in it, whatever the input; each iteration of a macro
            (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) costs the operations in
            its body again. Default 10,000: far above an ordinary filter (tens of steps), and a
            few milliseconds of work at most.
        max_output_bytes: what one evaluation may build, in total: the characters of every
            string and the bytes of every bytes value an operation makes, plus 8 per member of
            every list and 16 per entry of every map it makes (values read from the variables
            are not counted, only what the expression creates). Default 1 MiB.
        max_depth: deepest nesting of operations in the expression (``a || b || c`` is one
            level, ``f(g(h(x)))`` three). Default 64.
    """

    max_steps: int = 10_000
    max_output_bytes: int = 1 << 20
    max_depth: int = 64

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_output_bytes", "max_depth"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"Budget.{name} must be a positive integer, not {value!r}")


DEFAULT_BUDGET: Final = Budget()
"""The budget every expression gets unless its caller passes another."""


class CelSyntaxError(FilterError):
    """The text is not a CEL expression this library evaluates.

    Attributes:
        position: where the problem was found, or ``None``.
    """

    def __init__(self, path: str, message: str, position: Position | None = None) -> None:
        super().__init__(path, message)
        self.position = position


class CelCostError(CelSyntaxError):
    """The expression's static cost estimate (or its nesting) is over the budget."""


class CelEvaluationError(Exception):
    """One evaluation failed; the expression itself is valid.

    Attributes:
        reason: what went wrong, in a few words.
        position: the (line, column) of the operation that failed, when known.
    """

    def __init__(self, reason: str, position: Position | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position

    def __str__(self) -> str:
        if self.position is None:
            return self.reason
        return f"{self.reason} (at line {self.position[0]}, column {self.position[1]})"


class BudgetExceeded(CelEvaluationError):
    """The evaluation went over its :class:`Budget`; ``reason`` names the limit."""
