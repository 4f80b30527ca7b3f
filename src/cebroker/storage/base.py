"""The storage bundle: one backend's stores, opened and closed together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.storage.archive import EventArchive
from cebroker.storage.circuits import CircuitStore
from cebroker.storage.claims import Claims
from cebroker.storage.deliveries import DeliveryLog
from cebroker.storage.health import StorageHealth
from cebroker.storage.pull import PullLog
from cebroker.storage.registry import RegistryStore
from cebroker.storage.replies import ReplyChannel
from cebroker.storage.subscriptions import SubscriptionStore


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageOptions:
    """Settings every backend takes.

    Args:
        dedup_window: seconds within which a repeated ``(tenant, source, id)`` is a duplicate.
        busy_timeout: seconds a call waits for a lock held by someone else before it fails
            with ``StorageUnavailable("database locked")``.
        clock: where the delivery log reads the time it stores and compares (acceptance, due
            times, failures, the de-duplication window): the clock the dispatcher schedules on.
        lease: seconds after its last heartbeat at which an instance of a shared backend counts
            as dead and the others take its claimed deliveries over (unused by SQLite).
        retention: seconds every accepted event is kept in the archive, matched or not
            (:mod:`cebroker.storage.archive`); 0 keeps an event only while it has deliveries.
    """

    dedup_window: float = 600.0
    busy_timeout: float = 10.0
    clock: Clock = SYSTEM_CLOCK
    lease: float = 10.0
    retention: float = 0.0


@runtime_checkable
class Storage(Protocol):
    """Everything the broker keeps, behind the contracts, from one backend.

    Lifecycle: ``prepare()`` (synchronous, before the server starts: exclusive ownership where
    the backend needs it, schema migrations), then ``open()`` on the event loop, then
    ``close()``. The stores may be used between ``open()`` and ``close()`` only.
    """

    @property
    def name(self) -> str:
        """What the storage is, for messages (the database file, the server)."""
        ...

    @property
    def subscriptions(self) -> SubscriptionStore:
        """The subscription store."""
        ...

    @property
    def deliveries(self) -> DeliveryLog:
        """The delivery log."""
        ...

    @property
    def claims(self) -> Claims | None:
        """How this instance shares the delivery log's work with the others (claims, leases,
        shared token buckets), or None when no other instance uses the storage (SQLite)."""
        ...

    @property
    def pull(self) -> PullLog:
        """Receiving and settling PULL subscriptions' deliveries under locks."""
        ...

    @property
    def circuits(self) -> CircuitStore:
        """The open circuits of subscriptions whose sinks are down."""
        ...

    @property
    def archive(self) -> EventArchive:
        """The event archive and its replays (the delivery log's events, kept longer)."""
        ...

    @property
    def registry(self) -> RegistryStore:
        """The registry store."""
        ...

    @property
    def replies(self) -> ReplyChannel:
        """Where committed replies are announced to every instance (request-reply)."""
        ...

    @property
    def health(self) -> StorageHealth:
        """Whether writes currently succeed, and why not."""
        ...

    def prepare(self) -> None:
        """Take ownership and bring every component's schema up to date; idempotent.

        Raises:
            StorageInUse: another broker holds the storage.
            SchemaTooNew: the stored schema is newer than this code.
            StorageUnavailable: the storage cannot be reached or read.
        """
        ...

    async def open(self) -> None:
        """Prepare if not done yet, then start serving calls."""
        ...

    async def close(self) -> None:
        """Finish queued writes, release connections and ownership; idempotent."""
        ...
