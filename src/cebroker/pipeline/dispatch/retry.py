"""What follows a failed delivery attempt: another attempt later, or the dead letter.

:func:`decide` is a pure function of the subscription's policy, the attempts made so far, the
error and the time, so that every rule can be tested without a sink or a clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ceprotocols.errors import DeliveryError

from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.redaction import redact_userinfo


@dataclass(frozen=True, slots=True)
class Retry:
    """Try again at ``next_at`` (epoch seconds); ``error`` is kept as the last error."""

    attempts: int
    next_at: float
    error: str


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Move the delivery to the dead letters with ``reason`` and the sink's status and body."""

    attempts: int
    reason: str
    status: str | None
    body: str | None


def decide(
    policy: DeliveryPolicy,
    attempts: int,
    error: DeliveryError,
    *,
    first_at: float,
    now: float,
    uniform: Callable[[float, float], float] = random.uniform,
    circuit_open: bool = False,
) -> Retry | GiveUp:
    """The outcome of a failed attempt.

    While the subscription's circuit is open (or this failure opened it) a retryable failure
    is about the sink, not the event: the delivery is due again at once, without a backoff of
    its own, and the circuit decides when the sink is tried (see
    :mod:`~cebroker.pipeline.dispatch.circuits`). ``maxattempts`` and ``ttl`` apply as ever.

    Args:
        policy: the subscription's delivery policy.
        attempts: attempts made before this one.
        error: why this attempt failed; a non-retryable error is final at once.
        first_at: when the event was accepted (``policy.ttl`` counts from there).
        now: when this attempt failed.
        uniform: the random draw of the backoff's jitter (``random.uniform`` by default).
        circuit_open: the sink's circuit is open, as said above.
    """
    made = attempts + 1
    message = redact_userinfo(str(error))
    if error.retryable:
        next_at = now if circuit_open else now + policy.delay(made, error.retry_after, uniform)
        if not policy.gives_up(made, next_at, first_at):
            return Retry(made, next_at, message)
        message = f"gave up after {made} attempts: {message}"
    status = None if error.status is None else str(error.status)
    return GiveUp(made, message, status, error.body)
