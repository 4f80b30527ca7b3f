"""The ingress contract: one :class:`Receiver` per source, feeding decoded events to a callback.

A receiver consumes its source continuously, decodes each message as a CloudEvent (binary or
structured mode) and hands the events to ``on_events``. It acknowledges a message upstream only
after ``on_events`` returned for it, so an event is never acknowledged before the callback has
stored it. What ``on_events`` raises decides what happens next:

* :class:`~ceprotocols.errors.BindingError`: the events are not acceptable. A batch is retried
  event by event to find the culprits; each invalid event is counted, logged with the reason and
  acknowledged in the protocol's "reject" form (AMQP ``rejected``, JetStream ``term``) or plainly
  acknowledged where the protocol has no such form (MQTT, Kafka), so it never blocks the source.
* anything else: a transient failure (storage busy, shutting down). Nothing is acknowledged; the
  same events are handed over again after a pause, in order.

A message that does not decode is treated like an invalid event. Receivers never raise out of
:meth:`Receiver.run` for a bad message; they reconnect after connection failures.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ceprotocols.errors import BindingError

log = logging.getLogger("ceprotocols.receiver")

#: Receives decoded events; returns once they are stored (see the module doc for what it raises).
OnEvents = Callable[[list[dict[str, Any]]], Awaitable[None]]

#: Pause before handing the same events over again after a transient failure, and before a
#: reconnect attempt.
RETRY_PAUSE = 0.5


@dataclass(slots=True)
class ReceiverStats:
    """Counters of one receiver, for logs and metrics. ``subscribed`` turns true once the
    receiver consumes (subscription made, link attached, group joined requested)."""

    subscribed: bool = False
    received: int = 0
    accepted: int = 0
    invalid: int = 0
    retries: int = 0
    reconnects: int = 0


@runtime_checkable
class Receiver(Protocol):
    """Consumes one source."""

    source: str
    stats: ReceiverStats

    async def run(self, on_events: OnEvents) -> None:
        """Consume until cancelled or :meth:`aclose` is called."""
        ...

    async def aclose(self) -> None:
        """Stop consuming and release the connection."""
        ...


@dataclass(frozen=True, slots=True)
class Decoded:
    """The outcome of decoding one message: an event, or the reason it is not one."""

    event: dict[str, Any] | None
    error: str | None = None


def decode(decoder: Callable[[Any], dict[str, Any]], message: Any) -> Decoded:
    """Decode with ``decoder``, turning BindingError into a reason."""
    try:
        return Decoded(decoder(message))
    except BindingError as exc:
        return Decoded(None, str(exc))


class Handover:
    """Hands decoded messages to ``on_events`` with the module's retry and rejection rules."""

    def __init__(self, source: str, stats: ReceiverStats) -> None:
        self.source = source
        self.stats = stats

    async def __call__(self, items: Sequence[Decoded], on_events: OnEvents) -> list[str | None]:
        """Hand over ``items``; the result has, per item, ``None`` when it was accepted or the
        reason it is invalid. Returns only when every item has one of the two outcomes."""
        self.stats.received += len(items)
        outcome: list[str | None] = [item.error for item in items]
        valid = [(i, item.event) for i, item in enumerate(items) if item.event is not None]
        if valid and await self._try([event for _, event in valid], on_events) is not None:
            # The batch was refused: find the invalid events one by one.
            for i, event in valid:
                outcome[i] = await self._try([event], on_events)
        for reason in outcome:
            if reason is None:
                self.stats.accepted += 1
            else:
                self.stats.invalid += 1
                log.warning("source %s: invalid message dropped: %s", self.source, reason)
        return outcome

    async def _try(self, events: list[dict[str, Any]], on_events: OnEvents) -> str | None:
        """``None`` once ``on_events`` accepted ``events``; the reason if it refused them as
        invalid. Transient failures are retried after a pause, indefinitely (until cancelled)."""
        while True:
            try:
                await on_events(events)
                return None
            except BindingError as exc:
                return str(exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the callback's storage failed: keep the events, try again
                self.stats.retries += 1
                log.warning("source %s: ingest failed, retrying: %s", self.source, exc)
                await asyncio.sleep(RETRY_PAUSE)
