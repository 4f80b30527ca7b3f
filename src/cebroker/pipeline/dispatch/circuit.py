"""One sink's circuit as plain state and pure rules: which failures count, when it opens, how
long to wait between probes.

**What counts.** A failed attempt counts toward the circuit when it is retryable: the sink
could not be reached (DNS, connection refused or reset, TLS), did not answer within the
subscription's ``timeout`` (a hanging sink included), answered ``5xx``, ``408`` or ``429``, or
the protocol reported a transient refusal (AMQP ``released``/``modified``, a retriable Kafka or
NATS error, an MQTT publish that failed); a protocol whose sender is not installed counts too.
A final failure (any other ``4xx``, a request that cannot be sent, a refused destination, an
expired credential, an event the binding cannot encode) is about the event or the
subscription, not the sink's health: it goes to the dead letters, and since the sink answered,
it resets the count like a success does.

**When it opens.** After :data:`OPEN_AFTER` counting failures in a row. A success or a final
failure in between starts the count again, so a sink that fails one event now and then (a 500
for one payload while the others get through) never opens: that event is retried on its own
backoff.

**Probes.** While open, one delivery at a time (the earliest due) is sent as a probe. The
first goes ``initialdelay`` after the circuit opened, each further one twice as long after the
last failed probe, never longer than the probe cap (``config.probemaxdelay``, else the
broker's ``--probe-max-delay``), except that a ``Retry-After`` the sink sent with the failure
is honoured up to ``retryaftermax``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ceprotocols.errors import DeliveryError

from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.storage.circuits import Circuit

#: Counting failures in a row that open a circuit.
OPEN_AFTER = 5


def counts(error: DeliveryError) -> bool:
    """Whether ``error`` says the sink is unavailable (see the module docstring)."""
    return error.retryable


def probe_delay(policy: DeliveryPolicy, failed_probes: int, retry_after: float | None, cap: float) -> float:
    """Seconds from a failure to the next probe, after ``failed_probes`` failed probes."""
    delay = min(cap, policy.initialdelay * 2.0 ** min(failed_probes, 60))
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.retryaftermax))
    return delay


def timestamp(epoch: float) -> str:
    """RFC 3339 UTC with milliseconds, as the API writes times."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def expiry_reason(circuit: Circuit, ttl: float) -> str:
    """The dead letter's reason for a delivery whose time to live ran out while the sink was
    down."""
    return (
        f"not delivered within its time to live ({ttl:g}s): the sink has been unavailable since "
        f"{timestamp(circuit.opened_at)} (last error: {circuit.last_error})"
    )


@dataclass(slots=True)
class SinkCircuit:
    """What the dispatcher knows of one subscription's circuit."""

    #: Counting failures in a row while closed.
    streak: int = 0
    #: The open circuit, as stored; None while closed.
    open: Circuit | None = None
    #: The delivery being sent as the probe, if one is.
    probe: int | None = None
    #: When the pending deliveries must next be checked for an expired time to live (open only).
    sweep_at: float = 0.0
    #: The protocol and sink the circuit opened for (a replaced sink gets a fresh start).
    target: tuple[str, str] | None = None
