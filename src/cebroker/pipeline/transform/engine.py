"""The CEL engine transformations run on: ``cefilters.cel``, the bounded evaluator.

Everything else in :mod:`cebroker.pipeline.transform` imports the engine from here and only
through these names. Compiling raises :class:`cefilters.errors.FilterError` subclasses (syntax
errors, a static cost over the budget) with the position and the reason; evaluating takes and
returns plain JSON-like Python values (bytes for CEL ``bytes``) and raises
:class:`CelEvaluationError` (its reason, and its position when known), or
:class:`BudgetExceeded` when it goes over the :class:`Budget` (steps, bytes built, nesting).
"""

from cefilters.cel import Budget, BudgetExceeded, CelEvaluationError, CelProgram, compile_cel

__all__ = ["Budget", "BudgetExceeded", "CelEvaluationError", "CelProgram", "compile_cel"]
