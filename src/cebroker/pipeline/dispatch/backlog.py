"""The durable backlog's count: deliveries in the log that are not settled yet.

One object owns the number. The dispatcher adds what an ingest or a re-drive wrote; the parts
that settle deliveries (completion writes, dead letters, a deleted subscription's clean-up)
take theirs off. Ingress reads it to refuse events once the backlog is over its bound, and the
``cebroker_delivery_backlog`` gauge shows it.
"""

from __future__ import annotations

from typing import Any


class Backlog:
    """Pending deliveries in the durable log; ``gauge`` (a Prometheus gauge) follows the count."""

    def __init__(self, gauge: Any) -> None:
        self._gauge = gauge
        self._pending = 0

    @property
    def pending(self) -> int:
        """Deliveries written to the log and not yet delivered, dead-lettered or dropped."""
        return self._pending

    def added(self, count: int) -> None:
        """``count`` deliveries were written to the log."""
        if count:
            self._pending += count
            self._gauge.set(self._pending)

    def set(self, count: int) -> None:
        """The count read from a shared log (every instance's deliveries)."""
        self._pending = count
        self._gauge.set(count)

    def settled(self, count: int) -> None:
        """``count`` deliveries left the log (never below zero: a clean-up may race a completion)."""
        if count:
            self._pending = max(0, self._pending - count)
            self._gauge.set(self._pending)
