"""The subscription index: match an event against many subscriptions in sublinear time."""

from __future__ import annotations

from .subscription_index import SubscriptionIndex

__all__ = ["SubscriptionIndex"]
