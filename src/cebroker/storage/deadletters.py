"""Dead letters: the deliveries given up on, read and redriven (the :class:`DeadLetters`
contract)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


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


@runtime_checkable
class DeadLetters(Protocol):
    """A subscription's dead letters: pages of them, and their way back into the log.

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`; a
    ``redrive`` that raises stored nothing, and one that returns survives power loss.
    """

    async def dead_letters(self, subscription: str, after: int, limit: int) -> list[DeadLetter]:
        """One page of a subscription's dead letters, oldest first, ids greater than ``after``."""
        ...

    async def redrive(self, subscription: str, ids: Sequence[int] | None) -> int:
        """Turn dead letters (all of the subscription's, or those ``ids``) back into deliveries
        due now; returns how many."""
        ...
