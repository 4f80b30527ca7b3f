"""The pull contract: consumers receive a PULL subscription's deliveries under a lock.

Pull delivery is a sink that waits instead of a sender that pushes. The deliveries are the very
rows of the delivery log (:mod:`cebroker.storage.deliveries`): a *receive* claims due ones with
a lease (the **lock**) for the caller, *acknowledge* completes them, *release* reschedules them,
*reject* dead-letters them and *renew* extends the lease. Ordering groups, dead letters and
counts are the push path's.

**Lock tokens** are opaque to consumers: ``<delivery id>.<random 128 bits>``, new for each
delivery attempt (each receive of an event), so a token from an earlier attempt never settles
a later one. A receive counts the attempt (the *delivery count*, 1 on the first receive) and
makes the delivery due again when its lock ends: a lock that expires without a settlement hands
the event out again, to anyone, with the count one higher. A restart therefore loses nothing.

**Results per token**: ``None`` when it succeeded, else why not:

* :data:`UNKNOWN` — the token names no delivery this log holds (never issued, malformed, or
  settled by another instance);
* :data:`EXPIRED` — its lock ended before the call (the event may have been received again);
* :data:`SETTLED` — this instance already acknowledged, released or rejected it.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: Why a token failed: see the module docstring.
UNKNOWN = "unknown"
EXPIRED = "expired"
SETTLED = "settled"

#: How many settled tokens a log remembers (to answer :data:`SETTLED` rather than unknown).
SETTLED_MEMORY = 100_000


@dataclass(frozen=True, slots=True)
class Locked:
    """A delivery handed to a consumer: its lock token, event and lock."""

    token: str
    delivery: int
    #: The event's JSON as stored.
    body: bytes | str
    #: How many times it has been received, this time included (1 on the first receive).
    count: int
    locked_until: float
    #: When the event was accepted.
    first_at: float
    #: The replay that queued this delivery (:mod:`cebroker.storage.archive`), None if live.
    replay: str | None = None


@dataclass(frozen=True, slots=True)
class TokenResult:
    """The outcome of one token of a settlement: ``error`` None when it succeeded."""

    token: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LockStats:
    """A PULL subscription's deliveries: all pending, those locked now, the oldest lock's start."""

    pending: int
    locked: int
    oldest_lock: float | None


@runtime_checkable
class PullLog(Protocol):
    """Receive and settle a PULL subscription's deliveries under locks (see the module docstring).

    Every call is about one subscription: a token of another subscription is :data:`UNKNOWN`.
    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`.
    """

    async def receive(self, subscription: str, limit: int, lock: float, max_deliveries: int) -> list[Locked]:
        """Lock up to ``limit`` due deliveries (earliest due first) for ``lock`` seconds. A
        delivery already received ``max_deliveries`` times is moved to the dead letters instead
        (reason ``"maximum delivery count reached"``)."""
        ...

    async def acknowledge(self, subscription: str, tokens: Sequence[str]) -> list[TokenResult]:
        """Complete the locked deliveries (counted as delivered)."""
        ...

    async def release(self, subscription: str, tokens: Sequence[str], delay: float) -> list[TokenResult]:
        """End the locks; the deliveries fall due again after ``delay`` seconds."""
        ...

    async def reject(self, subscription: str, tokens: Sequence[str], reason: str) -> list[TokenResult]:
        """Move the locked deliveries to the dead letters with ``reason``."""
        ...

    async def renew(self, subscription: str, tokens: Sequence[str], lock: float) -> list[TokenResult]:
        """Extend the locks to ``lock`` seconds from now."""
        ...

    async def locks(self, subscription: str) -> LockStats:
        """The subscription's pending and locked deliveries and the oldest lock's start."""
        ...


def new_token(delivery: int) -> str:
    """A fresh lock token for one attempt of ``delivery``."""
    return f"{delivery}.{secrets.token_hex(16)}"


def token_delivery(token: str) -> int | None:
    """The delivery id a token names, None if it is not one of ours."""
    head, dot, tail = token.partition(".")
    if not dot or not head.isdigit() or len(tail) != 32 or len(head) > 18:
        return None
    return int(head)


class SettledTokens:
    """The tokens this process settled lately (bounded, oldest forgotten first)."""

    def __init__(self, size: int = SETTLED_MEMORY) -> None:
        self._size = size
        self._tokens: OrderedDict[str, None] = OrderedDict()

    def add(self, token: str) -> None:
        """Remember ``token`` as settled."""
        self._tokens[token] = None
        while len(self._tokens) > self._size:
            self._tokens.popitem(last=False)

    def why(self, token: str) -> str:
        """Why a token that names no held delivery failed: settled here, or unknown."""
        return SETTLED if token in self._tokens else UNKNOWN
