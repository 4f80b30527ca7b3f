"""The subscription store contract, its query types and the in-process change feed.

Every backend implements :class:`SubscriptionStore`. Writes are transactional; once a write has
committed, the store publishes a :class:`SubscriptionChange` on its :class:`ChangeFeed` *before*
the write call returns, in commit order, so a listener (the dispatcher's index) is in step with
every event ingested after the API call that made the change has answered.

Every change has a **version**, one more than the change before it. A store shared by several
broker instances (a database server) also publishes the changes the other instances commit, in
version order, as it hears of them; ``catch_up`` reads what it has not heard yet, so an ingest
that finds itself behind (see ``DeliveryLog.append``) can wait for nothing but the database.
"""

from __future__ import annotations

import base64
import binascii
import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cebroker.errors import QuotaExceeded
from cebroker.subscription import Subscription

log = logging.getLogger("cebroker.storage")


class InvalidCursor(ValueError):
    """A page cursor that the store did not issue (or that was altered)."""


class ChangeKind(enum.Enum):
    """What happened to a subscription."""

    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class SubscriptionChange:
    """One committed change; for DELETED, ``subscription`` is the subscription as it was."""

    kind: ChangeKind
    subscription: Subscription


Listener = Callable[[SubscriptionChange], None]


class ChangeFeed:
    """Synchronous in-process fan-out of committed changes to listeners.

    Listeners run on the event loop, after commit and before the write returns; they must be
    quick and must not raise (an exception from one listener does not stop the others).
    """

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Register ``listener``; returns a function that unregisters it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def publish(self, change: SubscriptionChange) -> None:
        """Deliver ``change`` to every listener, in registration order."""
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:  # a broken listener must not undo a committed write
                log.exception("change listener failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionQuery:
    """Filters and pagination for listing subscriptions; ``cursor`` is opaque to callers.

    ``tenant``, when given, restricts the listing to that tenant's subscriptions (a backend
    answers it from an index on ``(tenant, creation order)``); ``None`` lists every tenant's.
    """

    tenant: str | None = None
    protocol: str | None = None
    source: str | None = None
    type: str | None = None
    sink: str | None = None
    limit: int = 100
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionPage:
    """One page of a query; ``next_cursor`` is None on the last page."""

    items: Sequence[Subscription]
    next_cursor: str | None


@runtime_checkable
class SubscriptionStore(Protocol):
    """Durable storage of subscriptions with a change feed.

    The storage bundle opens and closes it. Errors: ``get`` returns None for an unknown id;
    ``replace``/``delete`` raise :class:`cebroker.errors.NotFound` for an unknown id and
    :class:`cebroker.errors.PreconditionFailed` when ``expected_revision`` is given and differs;
    ``create`` raises :class:`cebroker.errors.Conflict` for an id already stored and
    :class:`cebroker.errors.QuotaExceeded` when ``max_per_tenant`` is given and the
    subscription's tenant holds that many already (counted in the same transaction as the
    insert, so concurrent creates never exceed it); ``query``
    raises :class:`InvalidCursor` for a cursor it did not issue and ValueError for a limit
    below one; any call may raise :class:`cebroker.storage.errors.StorageUnavailable` when the
    backend fails. A write that raises stored nothing and published nothing.
    """

    @property
    def changes(self) -> ChangeFeed:
        """The feed on which every committed write is published."""
        ...

    @property
    def version(self) -> int:
        """The version of the last change published on the feed (0 before any)."""
        ...

    async def catch_up(self) -> None:
        """Publish every committed change, any instance's, not yet published; a store with a
        synchronous feed (one process) has none."""
        ...

    async def create(self, subscription: Subscription, *, max_per_tenant: int | None = None) -> Subscription:
        """Store a new subscription (its ``id`` and ``tenant`` already assigned); returns it as
        stored. ``max_per_tenant`` caps the subscriptions of its tenant (a subscription without a
        tenant is not counted)."""
        ...

    async def get(self, subscription_id: str) -> Subscription | None:
        """The subscription with this id, or None."""
        ...

    async def replace(
        self, subscription: Subscription, *, expected_revision: int | None = None
    ) -> Subscription:
        """Replace an existing subscription; the stored revision is incremented. The tenant is
        the stored one, whatever ``subscription.tenant`` says (a subscription never changes
        tenant)."""
        ...

    async def delete(self, subscription_id: str, *, expected_revision: int | None = None) -> Subscription:
        """Delete and return the subscription as it was."""
        ...

    async def query(self, query: SubscriptionQuery) -> SubscriptionPage:
        """List subscriptions matching every given filter, in creation order, one page at a time."""
        ...

    async def all(self) -> list[Subscription]:
        """Every subscription in creation order, secrets included (for the dispatcher at start-up)."""
        ...


_CURSOR_PREFIX = "seq:"


def encode_cursor(seq: int) -> str:
    """An opaque cursor that resumes a listing after creation sequence ``seq``."""
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{seq}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The creation sequence a cursor from :func:`encode_cursor` resumes after.

    Raises:
        InvalidCursor: the text is not a cursor this module produced.
    """
    padded = cursor + "=" * (-len(cursor) % 4)
    try:
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError) as exc:
        raise InvalidCursor("not a cursor returned by this broker") from exc
    digits = text.removeprefix(_CURSOR_PREFIX)
    if not text.startswith(_CURSOR_PREFIX) or not digits.isascii() or not digits.isdigit():
        raise InvalidCursor("not a cursor returned by this broker")
    seq = int(digits)
    if seq > 2**63 - 1:  # beyond a 64-bit INTEGER: cannot have been issued
        raise InvalidCursor("not a cursor returned by this broker")
    return seq


def quota_exceeded(tenant: str, limit: int) -> QuotaExceeded:
    """The error of a create over ``limit`` subscriptions of ``tenant`` (the same for every backend)."""
    return QuotaExceeded(f"tenant {tenant!r} holds {limit} subscriptions, the most it may; delete one first")


def page_start(query: SubscriptionQuery) -> int:
    """The creation sequence ``query`` resumes after; refuses a limit below one."""
    if query.limit < 1:
        raise ValueError(f"a page holds at least one subscription, not {query.limit}")
    return decode_cursor(query.cursor) if query.cursor is not None else 0
