"""Records the durable log takes and returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Incoming:
    """One event to commit, its de-duplication key and matched subscription ids.

    ``event`` is the JSON-form dict, or that event already serialized as JSON (bytes or str).
    """

    event: Mapping[str, Any] | bytes | str
    source: str
    id: str
    subscriptions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Appended:
    """What an ingest wrote for one event: its sequence number (0 when it matched nothing),
    acceptance time and ``(delivery id, subscription)`` pairs."""

    seq: int
    at: float
    deliveries: list[tuple[int, str]]


@dataclass(frozen=True, slots=True)
class Pending:
    """A delivery row read back from the log."""

    id: int
    event_seq: int
    subscription: str
    attempts: int
    first_at: float
    #: The event's JSON as stored (None for a delivery handed over straight from its ingest).
    body: bytes | str | None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A delivery that was given up on, with why."""

    id: int
    subscription: str
    event: dict[str, Any]
    status: str | None
    body: str | None
    attempts: int
    last_error: str
    first_at: float
    failed_at: float
