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
        self._written = 0  # every delivery ever added here: marks for reads of a shared log

    @property
    def pending(self) -> int:
        """Deliveries written to the log and not yet delivered, dead-lettered or dropped."""
        return self._pending

    def added(self, count: int) -> None:
        """``count`` deliveries were written to the log."""
        if count:
            self._pending += count
            self._written += count
            self._gauge.set(self._pending)

    def mark(self) -> int:
        """Where this instance's additions stand: take it before reading a shared log's count."""
        return self._written

    def read(self, count: int, mark: int) -> None:
        """The count read from a shared log (every instance's deliveries), read after ``mark``.

        Deliveries this instance added while the read was under way may be missing from it (their
        commit raced the read's snapshot), so they are kept on top of it until the next read. One
        whose commit the snapshot did see is then counted twice until that read: the count errs
        high for a moment rather than low, so ingress's bound and a wait for an empty backlog
        never see deliveries that are in fact pending as gone."""
        self._pending = count + (self._written - mark)
        self._gauge.set(self._pending)

    def settled(self, count: int) -> None:
        """``count`` deliveries left the log (never below zero: a clean-up may race a completion)."""
        if count:
            self._pending = max(0, self._pending - count)
            self._gauge.set(self._pending)
