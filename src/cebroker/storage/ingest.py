"""Ingest: committing accepted events with their deliveries (the :class:`Ingest` contract).

An event is appended once, with its de-duplication key and one delivery entry per matched
subscription, all in one transaction: an acknowledged event always has its deliveries stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Incoming:
    """One event to commit, its de-duplication key and matched subscription ids.

    ``event`` is the JSON-form dict, or that event already serialized as JSON (bytes or str).
    ``groups``, when not empty, has one entry per subscription: the ordering group of that
    subscription's delivery (None: unordered); see :mod:`cebroker.storage.deliveries`.
    ``tenant`` is the publishing tenant ("" for none: the operator's own sources, an admin, no
    authentication): an event is a duplicate only of an earlier one with the same ``(tenant,
    source, id)``, so that one tenant cannot suppress another's events by publishing their ids
    first.
    """

    event: Mapping[str, Any] | bytes | str
    source: str
    id: str
    subscriptions: tuple[str, ...]
    groups: tuple[str | None, ...] = ()
    tenant: str = ""
    #: The event's trace context, kept with it for every delivery attempt: the publish span's
    #: ``traceparent``, then ``;tracestate`` if any (None: not traced).
    trace: str | None = None


@dataclass(frozen=True, slots=True)
class Appended:
    """What an ingest wrote for one event: its sequence number (0 when nothing of it was
    stored: it matched nothing and the archive is off), acceptance time and ``(delivery id,
    subscription)`` pairs."""

    seq: int
    at: float
    deliveries: list[tuple[int, str]]
    #: Whether this instance holds the deliveries and may start them at once (a log no other
    #: instance shares); otherwise they wait in the log for a claim
    #: (:class:`~cebroker.storage.claims.Claims`). Deliveries with an ordering group always wait
    #: for ``due``, whatever this says: the log decides which of a group goes next.
    held: bool = True


@runtime_checkable
class Ingest(Protocol):
    """Commits events and their deliveries.

    Durability: once ``append`` returns, what it wrote survives power loss. Errors: it may
    raise :class:`cebroker.storage.errors.StorageUnavailable` (nothing stored),
    :class:`cebroker.errors.Overloaded` when too many writes are waiting, and TypeError for an
    event that cannot be serialized as JSON (that call alone fails; concurrent calls are not
    affected).
    """

    async def append(
        self,
        items: Sequence[Incoming],
        *,
        version: int | None = None,
        durable: Callable[[list[Appended | None]], None] | None = None,
    ) -> list[Appended | None]:
        """Commit events and their deliveries, all or nothing; per event what was written, or
        None for a duplicate: an event whose ``(tenant, source, id)`` was appended within the
        backend's de-duplication window (an earlier item of the same call counts too).

        ``durable``, when given, is called once with that same list as soon as the call's
        events are committed, on the event loop, before ``append`` returns, and never for a call
        that fails (its error is raised): a log whose commits are written by a task of its own
        calls it from there, so that a caller who only answers its client does so one turn of
        the event loop sooner than its own wake-up (under load each turn runs a burst of other
        work). It must not raise.

        ``version`` is the subscription store's ``version`` the items were matched at. A log
        shared by several instances checks it inside the append's transaction and raises
        :class:`~cebroker.storage.errors.IndexBehind` (storing nothing) when a later
        subscription change has committed: the caller catches up and matches again. A log of
        one process has an index that cannot be behind (its feed is synchronous) and ignores
        it."""
        ...
