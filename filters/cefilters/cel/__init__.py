"""Bounded CEL: compile a Common Expression Language expression once, evaluate it within a budget.

Public API::

    Budget(max_steps=10_000, max_output_bytes=1 MiB, max_depth=64)   # frozen dataclass
    compile_cel(text, *, budget=None) -> CelProgram                 # raises FilterError subclasses
    CelProgram.evaluate(variables) -> object                        # plain Python/JSON values
    CelProgram.shape -> Shape | None                               # what it builds, when it only
                                                                   # assembles its variables' members
    CelEvaluationError(reason, position)                            # a run-time error
    BudgetExceeded(CelEvaluationError)                              # over the run-time budget

Parsing uses cel-python's grammar (loaded on the first compilation, never at import); evaluation
is this package's own: the parse tree is compiled to closures that count the steps of every macro
iteration and check the size of every value an operation builds. cel-python's own evaluator
cannot be bounded (five nested ``map`` macros over ten-member lists ran for 100 s); the compiled
closures are also several times faster on ordinary filters. ``docs/filters-cesql.md`` in the
project documents the budget and the engine choice.

Compilation refuses, with :class:`CelSyntaxError` (a :class:`~cefilters.errors.FilterError`,
path ``""``), text that does not parse, and, with :class:`CelCostError`, an expression whose
static cost estimate or nesting is over the budget. Evaluation never runs past the budget: it
raises :class:`BudgetExceeded` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .budget import (
    DEFAULT_BUDGET,
    Budget,
    BudgetExceeded,
    CelCostError,
    CelEvaluationError,
    CelSyntaxError,
    Position,
)
from .compiler import ASSUMED_SIZE, Node, compile_tree
from .macros import Frame
from .shapes import Computed, Constant, Path, Record, Shape, built_of, depth_of_shape
from .values import to_output

__all__ = [
    "ASSUMED_SIZE",
    "DEFAULT_BUDGET",
    "MAX_LENGTH",
    "Budget",
    "BudgetExceeded",
    "CelCostError",
    "CelEvaluationError",
    "CelProgram",
    "CelSyntaxError",
    "Computed",
    "Constant",
    "Frame",
    "Path",
    "Position",
    "Record",
    "Shape",
    "built_of",
    "compile_cel",
    "compile_program",
    "depth_of_shape",
]

MAX_LENGTH: Final = 4096
"""Longest accepted expression, in characters."""


class CelProgram:
    """A compiled, bounded CEL expression. Immutable; evaluate it any number of times, from any
    thread: each evaluation keeps its own step count.

    Attributes:
        text: the source expression.
        budget: what one evaluation may spend.
        cost: the static cost estimate, in steps (at most ``budget.max_steps``).
        shape: what the expression builds when it is a map literal with constant keys, a
            member read of a variable or a constant (:mod:`cefilters.cel.shapes`), else
            ``None``: what an evaluation gives when no step of it fails, for callers that
            assemble it themselves.
    """

    __slots__ = ("_run", "budget", "cost", "shape", "text")

    def __init__(self, text: str, budget: Budget, node: Node) -> None:
        self.text = text
        self.budget = budget
        self.cost = node.cost
        self.shape = node.shape
        self._run = node.run

    def evaluate(self, variables: Mapping[str, object]) -> object:
        """The expression's value with ``variables`` bound, as plain Python/JSON values (a
        ``uint`` as ``int``, a timestamp as RFC 3339 text, a duration as ``"1.5s"``, a type as
        its name).

        Raises:
            BudgetExceeded: the evaluation went over the budget (steps or output size).
            CelEvaluationError: any other run-time error (an undeclared variable, a missing
                key, an overflow, no such overload).
        """
        return to_output(self.evaluate_raw(variables))

    def evaluate_raw(self, variables: Mapping[str, object]) -> object:
        """As :meth:`evaluate`, but the value as the evaluator holds it (``UInt``, ``datetime``…)."""
        try:
            return self._run(Frame(variables, self.budget))
        except CelEvaluationError:
            raise
        except RecursionError:
            raise BudgetExceeded("a value nested too deeply") from None
        except MemoryError:
            raise BudgetExceeded("out of memory") from None
        except Exception as error:  # a Mapping whose lookups raise, a value of an odd type
            raise CelEvaluationError(f"cannot evaluate: {type(error).__name__}") from None

    def __repr__(self) -> str:
        return f"CelProgram({self.text!r})"


def compile_program(text: str, budget: Budget, hidden: frozenset[str] = frozenset()) -> CelProgram:
    """As :func:`compile_cel`; the names in ``hidden`` are undeclared even when the variables
    hold them (the ``cel`` filter dialect hides the event's payload this way, without a copy)."""
    if not isinstance(text, str):
        raise CelSyntaxError("", f"a CEL expression is a string, not {type(text).__name__}")
    if not text.strip():
        raise CelSyntaxError("", "the CEL expression must not be empty")
    if len(text) > MAX_LENGTH:
        raise CelSyntaxError("", f"the CEL expression is longer than {MAX_LENGTH} characters")
    from celpy.celparser import CELParseError, CELParser  # deferred: loads the grammar

    try:
        tree = CELParser().parse(text)
    except CELParseError as error:
        line, column = error.line, error.column
        where = f" at line {line}, column {column}" if line is not None else ""
        position = (line, column) if line is not None and column is not None else None
        raise CelSyntaxError("", f"invalid CEL expression: syntax error{where}", position) from None
    except RecursionError:
        raise CelCostError("", "invalid CEL expression: nested too deeply") from None
    try:
        node = compile_tree(tree, budget, hidden)
    except RecursionError:
        raise CelCostError("", f"the expression is nested more than {budget.max_depth} levels deep") from None
    return CelProgram(text, budget, node)


def compile_cel(text: str, *, budget: Budget | None = None) -> CelProgram:
    """Compile ``text`` for evaluation within ``budget`` (:data:`DEFAULT_BUDGET` when ``None``).

    Raises:
        CelSyntaxError: the text is empty, longer than :data:`MAX_LENGTH`, or not valid CEL
            (``position`` says where, ``message`` why).
        CelCostError: the static cost estimate is over ``budget.max_steps`` or the expression is
            nested deeper than ``budget.max_depth``.
    """
    return compile_program(text, DEFAULT_BUDGET if budget is None else budget)
