"""The circuit store contract: whose sinks are considered down, shared by every broker instance.

A subscription's circuit opens when its sink has failed several attempts in a row (the
dispatcher decides when, see :mod:`cebroker.pipeline.dispatch.circuits`). While it is open, the
subscription's backlog is not attempted: one probe at a time goes to the sink, and the first
one that gets through closes the circuit. What every instance sharing a backend must agree on
lives here: since when the circuit is open, when the next probe may go, whether a probe is
running (a lease, so that a crashed instance's probe is taken over once it runs out) and the
last error.

The store is written per transition and per probe (open, claim a probe, record a failed probe,
close), never per pending delivery: an outage costs a few small writes per probe, whatever the
backlog. These are bookkeeping writes: losing one to a power cut only means the sink is tried
again sooner or later than planned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Circuit:
    """An open circuit: the sink of ``subscription`` is considered unavailable.

    Times are epoch seconds of the storage's clock.
    """

    subscription: str
    #: When the circuit opened (the sink has been unavailable since then).
    opened_at: float
    #: When the next probe may start.
    next_probe_at: float
    #: Probes that failed since the circuit opened (they lengthen the wait between probes).
    failed_probes: int
    #: Why the sink is considered down: the last failure seen.
    last_error: str
    #: A probe runs and holds the circuit until then (its lease); None when no probe runs.
    probe_until: float | None = None


@runtime_checkable
class CircuitStore(Protocol):
    """The open circuits; a closed circuit is not stored.

    Every call is atomic: two instances racing for the same transition see one winner.
    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`; a write
    that raises changed nothing.
    """

    async def circuits(self) -> dict[str, Circuit]:
        """Every open circuit, by subscription (one read)."""
        ...

    async def open(self, subscription: str, *, at: float, next_probe_at: float, error: str) -> Circuit:
        """Open the circuit of ``subscription`` unless it is open already; returns the stored
        circuit (an instance that finds it open adopts the existing one, its time included)."""
        ...

    async def claim_probe(
        self, subscription: str, *, now: float, until: float
    ) -> tuple[Circuit | None, bool]:
        """Take the right to send the one probe: granted when the circuit is open, its next
        probe is due at ``now`` and no other probe's lease runs past ``now``; the lease then
        lasts until ``until``. Returns the stored circuit (None when it is closed) and whether
        the probe was granted."""
        ...

    async def probe_failed(self, subscription: str, *, next_probe_at: float, error: str) -> Circuit | None:
        """Record a failed probe: one more failed probe, ``error`` as the last error, the next
        probe at ``next_probe_at``, the lease released. Returns the stored circuit, or None
        when it was closed meanwhile (nothing is then written)."""
        ...

    async def close(self, subscription: str) -> bool:
        """Close the circuit (the sink answered again, or the subscription is gone); returns
        whether it was open."""
        ...
