"""``BudgetObserver``: how the caller of a filter hears that an evaluation went over its budget.

A filter's ``matches`` answers only ``True`` or ``False``; an expression that went over its
budget answers ``False`` ("no match") and, when it was compiled with an observer, also tells it,
so that a service can count these (the library itself keeps no counters and does no IO).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["BudgetObserver"]


class BudgetObserver(Protocol):
    """Told of every evaluation stopped by its budget."""

    def over_budget(self, dialect: str, reason: str) -> None:
        """One evaluation of a ``dialect`` (``cel`` or ``sql``) expression went over its budget;
        ``reason`` says which limit, in a few words. Called on the evaluating thread; must not raise."""
        ...
