"""The subscription store contract and the in-process change feed.

Every backend (the embedded SQLite store now, PostgreSQL later) implements
:class:`SubscriptionStore`. Writes are transactional; once a write has committed, the store
publishes a :class:`SubscriptionChange` on its :class:`ChangeFeed` *before* the write call
returns, so a listener (the dispatcher's index) is in step with every event ingested after the
API call that made the change has answered.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from cebroker.errors import BrokerError

#: Credential fields that are write-only: stored, used for delivery, never returned or logged.
SECRET_CREDENTIAL_FIELDS = frozenset({"secret", "accesstoken", "refreshtoken"})


class StoreError(BrokerError):
    """The store failed (disk, corruption, locking); the write, if any, did not happen."""

    status = 503
    title = "Store unavailable"
    type_suffix = "store-unavailable"


class InvalidCursor(ValueError):
    """A page cursor that the store did not issue (or that was altered)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """A realized subscription: validated, defaults applied, ``id`` assigned by the broker.

    ``revision`` increases on every replace and is the basis of the ETag.
    """

    id: str
    protocol: str
    sink: str
    source: str | None = None
    types: tuple[str, ...] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    filters: tuple[Mapping[str, Any], ...] = ()
    protocolsettings: Mapping[str, Any] = field(default_factory=dict)
    sinkcredential: Mapping[str, Any] | None = None
    revision: int = 1

    @property
    def etag(self) -> str:
        """A strong ETag that changes whenever the subscription is replaced."""
        return f'"{self.id}-{self.revision}"'

    def to_json(self, *, include_secrets: bool = False) -> dict[str, Any]:
        """The subscription as the API returns it; secrets are left out unless asked for."""
        doc: dict[str, Any] = {"id": self.id}
        if self.source is not None:
            doc["source"] = self.source
        if self.types is not None:
            doc["types"] = list(self.types)
        doc["config"] = dict(self.config)
        doc["filters"] = [dict(f) for f in self.filters]
        doc["sink"] = self.sink
        doc["protocol"] = self.protocol
        doc["protocolsettings"] = dict(self.protocolsettings)
        if self.sinkcredential is not None:
            cred = dict(self.sinkcredential)
            if not include_secrets:
                cred = {k: v for k, v in cred.items() if k not in SECRET_CREDENTIAL_FIELDS}
            doc["sinkcredential"] = cred
        return doc


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

    Listeners run in the writer's call, after commit and before the write returns; they must be
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
                import logging

                logging.getLogger("cebroker.store").exception("change listener failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionQuery:
    """Filters and pagination for listing subscriptions; ``cursor`` is opaque to callers."""

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

    Errors: ``get`` returns None for an unknown id; ``replace``/``delete`` raise
    :class:`cebroker.errors.NotFound` for an unknown id and
    :class:`cebroker.errors.PreconditionFailed` when ``expected_revision`` is given and differs;
    ``create`` raises :class:`cebroker.errors.Conflict` for an id already stored; ``query`` raises
    :class:`InvalidCursor` for a cursor it did not issue; any call may raise :class:`StoreError`
    when the backend fails (nothing was written then).
    """

    @property
    def changes(self) -> ChangeFeed:
        """The feed on which every committed write is published."""
        ...

    async def open(self) -> None:
        """Create the schema if needed and make the store ready."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...

    async def create(self, subscription: Subscription) -> Subscription:
        """Store a new subscription (its ``id`` already assigned); returns it as stored."""
        ...

    async def get(self, subscription_id: str) -> Subscription | None:
        """The subscription with this id, or None."""
        ...

    async def replace(
        self, subscription: Subscription, *, expected_revision: int | None = None
    ) -> Subscription:
        """Replace an existing subscription; the stored revision is incremented."""
        ...

    async def delete(self, subscription_id: str, *, expected_revision: int | None = None) -> Subscription:
        """Delete and return the subscription as it was."""
        ...

    async def query(self, query: SubscriptionQuery) -> SubscriptionPage:
        """List subscriptions matching every given filter, in a stable order, one page at a time."""
        ...

    async def all(self) -> list[Subscription]:
        """Every subscription, secrets included (for the dispatcher at start-up)."""
        ...
