"""cefilters: CloudEvents Subscriptions API filters, CloudEvents SQL v1, CEL, and a subscription index.

Public API::

    cefilters.compile(filters, *, observer=None) -> Filter  # a filters array; raises FilterError
    cefilters.Filter                         # .matches(event) -> bool, never raises
    cefilters.FilterError                    # ValueError with .path (JSON Pointer) and .message
    cefilters.SubscriptionIndex(observer=None)  # add(key, filters, *, source, types), remove, match,
                                             # explain(key, event) -> Explanation
    cefilters.Explanation, cefilters.Check   # why a subscription accepts an event, condition by condition
    cefilters.sql                            # the CloudEvents SQL v1 engine
    cefilters.cel                            # bounded CEL: Budget, compile_cel, CelProgram
    cefilters.BudgetObserver                 # told of evaluations stopped by their budget

Dialects: ``exact``, ``prefix``, ``suffix``, ``all``, ``any``, ``not``, ``sql`` and the ``cel``
extension. The library does no IO; it depends on cel-python (its CEL parser only) and google-re2
(CEL's ``matches``), both loaded only when a ``cel`` filter is first compiled. Every ``sql`` and
``cel`` expression is bounded: a static estimate refuses costly ones at compile time, and an
evaluation over its run-time budget is "no match", told to the ``observer``.
"""

from __future__ import annotations

from . import sql
from .base import Event, Filter
from .checks import Check, Explainable, Explanation
from .compiler import compile
from .errors import FilterError
from .index import SubscriptionIndex
from .observer import BudgetObserver

__all__ = [
    "BudgetObserver",
    "Check",
    "Event",
    "Explainable",
    "Explanation",
    "Filter",
    "FilterError",
    "SubscriptionIndex",
    "compile",
    "sql",
]


def __getattr__(name: str) -> str:
    """``__version__``: the installed distribution's version (its one source is the repository's
    VERSION file), read when asked for. ``importlib.metadata`` loads the ``email`` and ``socket``
    modules, which this IO-free library keeps out of a process that only filters."""
    if name == "__version__":
        from importlib.metadata import version

        return version("cefilters")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
