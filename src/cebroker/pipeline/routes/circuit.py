"""The ``circuit`` member of the status resources (``GET /subscriptions/{id}/status`` and
``GET /status/subscriptions``), from the circuit store, so that every broker instance on a
shared backend shows the same state."""

from __future__ import annotations

from typing import Any

from cebroker.pipeline.dispatch.circuit import timestamp
from cebroker.storage.circuits import Circuit

#: A closed circuit: the sink's deliveries are attempted as usual.
CLOSED: dict[str, Any] = {
    "state": "closed",
    "openedAt": None,
    "nextProbeAt": None,
    "failedProbes": 0,
    "lastError": None,
}


def circuit_document(circuit: Circuit | None) -> dict[str, Any]:
    """``state`` (``closed``, ``open``, or ``probing`` while a probe holds it), since when it is
    open, when the next probe may go, how many probes failed and the last error."""
    if circuit is None:
        return dict(CLOSED)
    return {
        "state": "open" if circuit.probe_until is None else "probing",
        "openedAt": timestamp(circuit.opened_at),
        "nextProbeAt": timestamp(circuit.next_probe_at),
        "failedProbes": circuit.failed_probes,
        "lastError": circuit.last_error,
    }
