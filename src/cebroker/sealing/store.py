"""A :class:`~cebroker.storage.SubscriptionStore` that keeps every secret sealed in the one below.

It wraps any backend's store: what goes down has its credential secrets, tokens and webhook
secrets sealed (:class:`~cebroker.sealing.cipher.Sealer`), what comes up (reads and the change
feed) has them opened, so the API and the pipeline see plaintext and no backend ever does.
Each value's associated data is ``<subscription id>/<field>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from cebroker.sealing.cipher import Sealer, is_sealed, sealed_key_id
from cebroker.storage.subscriptions import (
    ChangeFeed,
    SubscriptionChange,
    SubscriptionPage,
    SubscriptionQuery,
    SubscriptionStore,
)
from cebroker.subscription import SECRET_CREDENTIAL_FIELDS, RetiredSecret, Subscription

Transform = Callable[[str, str], str]


def _secrets(subscription: Subscription, transform: Transform) -> Subscription:
    """``subscription`` with ``transform(value, context)`` applied to every secret."""
    sid = subscription.id
    credential = subscription.sinkcredential
    if credential is not None:
        credential = {
            name: transform(value, f"{sid}/sinkcredential/{name}")
            if name in SECRET_CREDENTIAL_FIELDS and isinstance(value, str)
            else value
            for name, value in credential.items()
        }
    secret = subscription.webhook_secret
    if secret is not None:
        secret = transform(secret, f"{sid}/protocolsettings/webhooksecret")
    retired = tuple(
        RetiredSecret(transform(r.secret, f"{sid}/retiredsecrets"), r.until)
        for r in subscription.retired_secrets
    )
    return dataclasses.replace(
        subscription, sinkcredential=credential, webhook_secret=secret, retired_secrets=retired
    )


def sealed_values(subscription: Subscription) -> list[str]:
    """Every secret value of ``subscription`` as stored."""
    found: list[str] = []

    def collect(value: str, context: str) -> str:
        found.append(value)
        return value

    _secrets(subscription, collect)
    return found


class SealedSubscriptionStore:
    """Seals secrets on their way into ``inner`` and opens them on their way out."""

    def __init__(self, inner: SubscriptionStore, sealer: Sealer) -> None:
        self.inner = inner
        self.sealer = sealer
        self._changes = ChangeFeed()
        # Subscribed for the store's lifetime: the inner feed publishes what it stored (sealed).
        inner.changes.subscribe(self._republish)

    @property
    def changes(self) -> ChangeFeed:
        """Committed changes, secrets opened."""
        return self._changes

    @property
    def version(self) -> int:
        """The version of the last change published (the store below's: changes are republished
        as they come)."""
        return self.inner.version

    async def catch_up(self) -> None:
        """Have the store below publish what it has not yet (republished here, opened)."""
        await self.inner.catch_up()

    def _seal(self, subscription: Subscription) -> Subscription:
        return _secrets(subscription, self.sealer.seal)

    def _open(self, subscription: Subscription) -> Subscription:
        return _secrets(subscription, self.sealer.open)

    def _republish(self, change: SubscriptionChange) -> None:
        self._changes.publish(SubscriptionChange(change.kind, self._open(change.subscription)))

    async def create(self, subscription: Subscription, *, max_per_tenant: int | None = None) -> Subscription:
        """Create, secrets sealed."""
        return self._open(await self.inner.create(self._seal(subscription), max_per_tenant=max_per_tenant))

    async def get(self, subscription_id: str) -> Subscription | None:
        """Read, secrets opened."""
        found = await self.inner.get(subscription_id)
        return self._open(found) if found is not None else None

    async def replace(
        self, subscription: Subscription, *, expected_revision: int | None = None
    ) -> Subscription:
        """Replace, secrets sealed."""
        stored = await self.inner.replace(self._seal(subscription), expected_revision=expected_revision)
        return self._open(stored)

    async def delete(self, subscription_id: str, *, expected_revision: int | None = None) -> Subscription:
        """Delete; the deleted subscription comes back with its secrets opened."""
        return self._open(await self.inner.delete(subscription_id, expected_revision=expected_revision))

    async def query(self, query: SubscriptionQuery) -> SubscriptionPage:
        """List, secrets opened."""
        page = await self.inner.query(query)
        return SubscriptionPage([self._open(s) for s in page.items], page.next_cursor)

    async def all(self) -> list[Subscription]:
        """Every subscription, secrets opened."""
        return [self._open(s) for s in await self.inner.all()]


async def verify_sealed(store: SubscriptionStore, sealer: Sealer) -> int:
    """Open every secret stored in ``store`` (a backend's store, below the sealing) once;
    return how many values are still stored in clear.

    Raises:
        SealingError: a value the key file cannot open (the wrong key file, or damage).
    """
    clear = 0
    for subscription in await store.all():
        _secrets(subscription, sealer.open)
        clear += sum(1 for value in sealed_values(subscription) if not is_sealed(value))
    return clear


async def reseal(store: SubscriptionStore, sealer: Sealer) -> int:
    """Seal again, with the sealer's current key, every secret in ``store`` (a backend's store)
    that is in clear or sealed with another key; returns how many subscriptions were rewritten."""
    count = 0
    current = sealer.current_id()
    for stored in await store.all():
        if all(sealed_key_id(v) == current for v in sealed_values(stored)):
            continue
        opened = _secrets(stored, sealer.open)
        await store.replace(_secrets(opened, sealer.seal), expected_revision=stored.revision)
        count += 1
    return count
