"""Token buckets by key (the :class:`RateBuckets` contract), and :class:`TokenBuckets`, the
buckets of one process."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cebroker.clock import Clock


@runtime_checkable
class RateBuckets(Protocol):
    """Token buckets by key, each of ``rate`` tokens per second with a burst of one second's
    worth. A backend several instances share holds them for every instance together."""

    async def take(self, key: str, rate: float) -> float:
        """Take one token from the bucket ``key``: 0.0 when taken, else the seconds to wait
        before one is there (nothing was taken). ValueError for a rate that is not positive."""
        ...


class TokenBuckets:
    """Buckets of ``rate`` tokens per second with a burst of one second's worth, on ``clock``,
    in one process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        #: key -> (tokens, when they were counted)
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, rate: float) -> float:
        """0.0 if a token was taken, else the seconds until one is there (nothing taken)."""
        if rate <= 0:
            raise ValueError(f"a rate is positive, not {rate}")
        capacity = max(1.0, rate)
        now = self._clock.monotonic()
        tokens, stamp = self._buckets.get(key, (capacity, now))
        tokens = min(capacity, tokens + max(0.0, now - stamp) * rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / rate
