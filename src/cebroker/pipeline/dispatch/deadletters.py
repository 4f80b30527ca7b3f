"""Forwarding dead letters: a copy of each dead-lettered event to the subscription's
``config.deadlettersink``, once, in the background (the dead letter itself is already stored).

The copy is sent over HTTP in structured mode, with the reason as extension attributes:
``deadletterreason``, ``deadlettersub``, ``deadletterattempts`` and, when the sink answered
with one, ``deadletterstatus``.

Every dead letter also emits the broker event ``dev.cebroker.delivery.deadlettered``
(:mod:`cebroker.pipeline.brokerevents`), except the dead letter of a broker event: that would
let one broker event beget another without bound.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ceprotocols.errors import DeliveryError
from ceprotocols.sender import Destination

from cebroker.pipeline.brokerevents import BrokerEvents, is_reserved
from cebroker.pipeline.dispatch.retry import GiveUp
from cebroker.pipeline.dispatch.tasks import Tasks
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.redaction import redact_userinfo
from cebroker.pipeline.senders import SenderPool
from cebroker.subscription import Subscription

log = logging.getLogger("cebroker.pipeline")

#: Longest reason carried in ``deadletterreason``.
REASON_LIMIT = 1024


def dead_letter_copy(event: Mapping[str, Any], subscription: str, outcome: GiveUp) -> dict[str, Any]:
    """The event as the dead-letter sink receives it: the original plus why it was given up."""
    copy = dict(event)
    copy.update(
        deadletterreason=outcome.reason[:REASON_LIMIT],
        deadlettersub=subscription,
        deadletterattempts=outcome.attempts,
    )
    if outcome.status is not None:
        copy["deadletterstatus"] = outcome.status
    return copy


class DeadLetterForwarder:
    """Sends dead-letter copies through the HTTP sender; a refusal is logged, not retried."""

    def __init__(
        self,
        senders: SenderPool,
        *,
        events: BrokerEvents | None = None,
        subscriptions: Mapping[str, Subscription] | None = None,
    ) -> None:
        self._events = events
        self._subscriptions = subscriptions or {}
        self._senders = senders
        self._sending = Tasks()

    def forward(
        self, event: Mapping[str, Any], subscription: str, policy: DeliveryPolicy, outcome: GiveUp
    ) -> None:
        """Send a copy of ``event`` to ``policy.deadlettersink`` (if it has one); emit the
        broker event of the dead letter."""
        if self._events is not None and not is_reserved(event):
            current = self._subscriptions.get(subscription)
            self._events.emit(
                "delivery.deadlettered",
                {
                    "subscription": subscription,
                    "event": {
                        "id": event.get("id"),
                        "source": event.get("source"),
                        "type": event.get("type"),
                    },
                    "attempts": outcome.attempts,
                    "reason": outcome.reason[:REASON_LIMIT],
                    "status": outcome.status,
                },
                tenant=current.tenant if current is not None else None,
            )
        if not policy.deadlettersink:
            return
        sink = policy.deadlettersink
        destination = Destination(
            protocol="HTTP", sink=sink, settings={"contentmode": "structured"}, timeout=policy.timeout
        )
        self._sending.spawn(self._send(dead_letter_copy(event, subscription, outcome), destination))

    async def _send(self, copy: dict[str, Any], destination: Destination) -> None:
        try:
            await self._senders.get("HTTP").deliver(copy, destination)
        except DeliveryError as exc:
            reason = redact_userinfo(str(exc))
            log.warning("dead-letter sink %s refused a copy: %s", redact_userinfo(destination.sink), reason)

    async def stop(self) -> None:
        """Cancel the copies still being sent."""
        await self._sending.cancel()
