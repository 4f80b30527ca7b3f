"""Subscription storage: the :class:`SubscriptionStore` contract and its backends."""

from cebroker.store.base import (
    ChangeFeed,
    ChangeKind,
    InvalidCursor,
    StoreError,
    Subscription,
    SubscriptionChange,
    SubscriptionPage,
    SubscriptionQuery,
    SubscriptionStore,
)

__all__ = [
    "ChangeFeed",
    "ChangeKind",
    "InvalidCursor",
    "StoreError",
    "Subscription",
    "SubscriptionChange",
    "SubscriptionPage",
    "SubscriptionQuery",
    "SubscriptionStore",
]
