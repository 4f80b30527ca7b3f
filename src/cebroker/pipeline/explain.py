"""Explaining a match: which condition of a subscription accepts or refuses an event.

The verdict is the filter index's own (``cefilters.SubscriptionIndex.explain``), evaluated through
the same compiled filters that match every ingested event, never a second implementation: for a
stored subscription through the live index, for a draft through a fresh index holding only the
draft, which the draft never leaves.
"""

from __future__ import annotations

from typing import Any

from cefilters import BudgetObserver, Explanation, SubscriptionIndex

from cebroker.contracts import Event
from cebroker.subscription import Subscription

__all__ = ["Explanation", "explain_draft", "to_json"]


def explain_draft(
    subscription: Subscription, event: Event, observer: BudgetObserver | None = None
) -> Explanation:
    """Explain ``event`` against a validated subscription that is not stored."""
    index: SubscriptionIndex[str] = SubscriptionIndex(observer=observer)
    index.add(
        "draft",
        list(subscription.filters),
        source=subscription.source,
        types=list(subscription.types) if subscription.types is not None else None,
    )
    return index.explain("draft", event)


def to_json(explanation: Explanation) -> dict[str, Any]:
    """The API's answer: ``{"matched": bool, "checks": [{"pointer", "matched", "detail"}]}``."""
    return {
        "matched": explanation.matched,
        "checks": [
            {"pointer": check.pointer, "matched": check.matched, "detail": check.detail}
            for check in explanation.checks
        ],
    }
