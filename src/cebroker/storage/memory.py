"""An in-memory :class:`~cebroker.storage.subscriptions.SubscriptionStore`: no durability, same
contract.

A test double for the parts that use a subscription store; the contract suite in
``tests/storage`` runs against it and the real backends alike. Nothing survives the process.
"""

from __future__ import annotations

import dataclasses

from cebroker.errors import Conflict, NotFound, PreconditionFailed
from cebroker.storage.subscriptions import (
    ChangeFeed,
    ChangeKind,
    SubscriptionChange,
    SubscriptionPage,
    SubscriptionQuery,
    encode_cursor,
    page_start,
    quota_exceeded,
)
from cebroker.subscription import Subscription


class MemorySubscriptionStore:
    """Subscriptions in a dict, in creation order; every method completes without awaiting,
    so each write is atomic with respect to the event loop."""

    def __init__(self) -> None:
        self._changes = ChangeFeed()
        self._rows: dict[str, tuple[int, Subscription]] = {}
        self._next_seq = 1
        self._version = 0

    @property
    def changes(self) -> ChangeFeed:
        """The feed on which every write is published."""
        return self._changes

    @property
    def version(self) -> int:
        """How many changes were published."""
        return self._version

    async def catch_up(self) -> None:
        """Nothing to do: every change is published as it is made."""

    def _publish(self, change: SubscriptionChange) -> None:
        self._version += 1
        self._changes.publish(change)

    async def create(self, subscription: Subscription, *, max_per_tenant: int | None = None) -> Subscription:
        """Store a new subscription; :class:`Conflict` if its id is taken, :class:`QuotaExceeded`
        if its tenant holds ``max_per_tenant`` already."""
        if subscription.id in self._rows:
            raise Conflict(f"a subscription with id {subscription.id!r} already exists")
        tenant = subscription.tenant
        held = sum(1 for _, sub in self._rows.values() if sub.tenant is not None and sub.tenant == tenant)
        if max_per_tenant is not None and tenant is not None and held >= max_per_tenant:
            raise quota_exceeded(tenant, max_per_tenant)
        stored = dataclasses.replace(subscription, revision=1)
        self._rows[stored.id] = (self._next_seq, stored)
        self._next_seq += 1
        self._publish(SubscriptionChange(ChangeKind.CREATED, stored))
        return stored

    async def get(self, subscription_id: str) -> Subscription | None:
        """The subscription with this id, or None."""
        row = self._rows.get(subscription_id)
        return row[1] if row else None

    async def replace(
        self, subscription: Subscription, *, expected_revision: int | None = None
    ) -> Subscription:
        """Replace a stored subscription, keeping its place in creation order."""
        seq, current = self._current(subscription.id, expected_revision)
        stored = dataclasses.replace(subscription, revision=current.revision + 1, tenant=current.tenant)
        self._rows[stored.id] = (seq, stored)
        self._publish(SubscriptionChange(ChangeKind.UPDATED, stored))
        return stored

    async def delete(self, subscription_id: str, *, expected_revision: int | None = None) -> Subscription:
        """Delete and return the subscription as it was."""
        _, current = self._current(subscription_id, expected_revision)
        del self._rows[subscription_id]
        self._publish(SubscriptionChange(ChangeKind.DELETED, current))
        return current

    async def query(self, query: SubscriptionQuery) -> SubscriptionPage:
        """One page of the matching subscriptions in creation order."""
        after = page_start(query)
        matches = [
            (seq, sub)
            for seq, sub in sorted(self._rows.values(), key=lambda row: row[0])
            if seq > after and _matches(sub, query)
        ]
        page = matches[: query.limit]
        more = len(matches) > query.limit
        return SubscriptionPage(
            items=[sub for _, sub in page], next_cursor=encode_cursor(page[-1][0]) if more else None
        )

    async def all(self) -> list[Subscription]:
        """Every subscription in creation order."""
        return [sub for _, sub in sorted(self._rows.values(), key=lambda row: row[0])]

    def _current(self, subscription_id: str, expected: int | None) -> tuple[int, Subscription]:
        row = self._rows.get(subscription_id)
        if row is None:
            raise NotFound(f"no subscription with id {subscription_id!r}")
        if expected is not None and expected != row[1].revision:
            raise PreconditionFailed("the subscription has changed since the given ETag was issued")
        return row


def _matches(sub: Subscription, query: SubscriptionQuery) -> bool:
    return (
        (query.tenant is None or sub.tenant == query.tenant)
        and (query.protocol is None or sub.protocol == query.protocol)
        and (query.source is None or sub.source == query.source)
        and (query.sink is None or sub.sink == query.sink)
        and (query.type is None or (sub.types is not None and query.type in sub.types))
    )
