"""Token buckets by key, in one process: how a log that no other instance shares answers
``DeliveryLog.take``."""

from __future__ import annotations

from cebroker.clock import Clock


class TokenBuckets:
    """Buckets of ``rate`` tokens per second with a burst of one second's worth, on ``clock``."""

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
