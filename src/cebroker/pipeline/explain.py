"""Explaining a match: which condition of a subscription accepts or refuses an event.

The verdict is the filter index's own (``cefilters.SubscriptionIndex.explain``), evaluated through
the same compiled filters that match every ingested event, never a second implementation: for a
stored subscription through the live index, for a draft through a fresh index holding only the
draft, which the draft never leaves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

from cefilters import SubscriptionIndex

from cebroker.contracts import Event
from cebroker.subscription import Subscription


class Check(Protocol):
    """One condition's outcome: its JSON Pointer in the subscription, the verdict, and why."""

    @property
    def pointer(self) -> str: ...
    @property
    def matched(self) -> bool: ...
    @property
    def detail(self) -> str: ...


class Explanation(Protocol):
    """Whether the subscription accepts the event, and every condition's outcome in document order."""

    @property
    def matched(self) -> bool: ...
    @property
    def checks(self) -> Sequence[Check]: ...


class ExplainingIndex(Protocol):
    """The part of the filter index's interface the explain routes use."""

    def explain(self, key: str, event: Event) -> Explanation:
        """Why the subscription ``key`` accepts ``event`` or not; KeyError for an unknown key."""
        ...


def explaining(index: SubscriptionIndex[str]) -> ExplainingIndex:
    """``index`` seen through :class:`ExplainingIndex`."""
    # The index's own explain() is structurally this interface; the cast spells out which part
    # of it the routes rely on.
    return cast(ExplainingIndex, index)


def explain_draft(subscription: Subscription, event: Event) -> Explanation:
    """Explain ``event`` against a validated subscription that is not stored."""
    index: SubscriptionIndex[str] = SubscriptionIndex()
    index.add(
        "draft",
        list(subscription.filters),
        source=subscription.source,
        types=list(subscription.types) if subscription.types is not None else None,
    )
    return explaining(index).explain("draft", event)


def to_json(explanation: Explanation) -> dict[str, Any]:
    """The API's answer: ``{"matched": bool, "checks": [{"pointer", "matched", "detail"}]}``."""
    return {
        "matched": explanation.matched,
        "checks": [
            {"pointer": check.pointer, "matched": check.matched, "detail": check.detail}
            for check in explanation.checks
        ],
    }
