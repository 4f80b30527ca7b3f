"""Sink replies: the events an HTTP sink answers a delivery with, published into the broker.

A subscription opts in with ``config.reply: publish`` (docs/replies.md). The reply enters through
the same ingest as any publish (:meth:`cebroker.pipeline.ingest.EventIngestor.accept`), as if the
subscription's tenant published it: the tenant's publish policy, event checks, registry
validation, ``(source, id)`` de-duplication, the archive and matching all apply unchanged.

Order matters for durability: the reply is committed *before* the delivery that produced it is
completed. A crash in between leaves the delivery pending, so it is delivered again; the sink's
second answer carries the same ``(source, id)`` and is counted as a duplicate, not published twice.

Each reply carries two extension attributes the broker sets:

* :data:`HOPS` (``cebrokerhops``): one more than the delivered event's (``0`` when absent). A
  reply whose count would exceed the broker's ``--reply-max-hops`` is not published; the delivery
  that produced it is dead-lettered with that reason (a loop of subscriptions answering each
  other stops there).
* :data:`IN_REPLY_TO` (``inreplyto``): the delivered event's ``id``, unless the sink set it.

A reply that the policy refuses, that is not a valid event, or that the registry refuses under
``enforce`` is not published; the delivery still counts as done (the sink has it) and the refusal
is counted per subscription (:class:`ReplyCounts`, on ``/status/subscriptions``). When the reply
cannot be committed (the broker is overloaded, storage fails) the delivery is retried later.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ceprotocols.errors import DeliveryError
from ceprotocols.sender import Reply

from cebroker.contracts import IngestResult
from cebroker.errors import Forbidden, Overloaded, ValidationError
from cebroker.subscription import Subscription

#: The ``config`` key and the value that turns replies on.
CONFIG_KEY = "reply"
PUBLISH = "publish"
#: Extension attribute counting the replies between an event and the first event of its chain.
HOPS = "cebrokerhops"
#: Extension attribute naming the id of the event a reply answers.
IN_REPLY_TO = "inreplyto"

#: Publishes events as a tenant would: ``events`` and the tenant (None: unrestricted).
Publish = Callable[[Sequence[dict[str, Any]], str | None], Awaitable[IngestResult]]


def wants_replies(subscription: Subscription) -> bool:
    """Whether ``subscription`` publishes its sink's replies."""
    return subscription.delivery.reply


def hops_of(event: Mapping[str, Any]) -> int:
    """The :data:`HOPS` of ``event`` (0 when absent or not a whole number)."""
    value = event.get(HOPS)
    try:
        return max(0, int(str(value))) if value is not None else 0
    except ValueError:
        return 0


class HopLimit(Exception):
    """A reply would make its chain longer than the broker allows."""


@dataclass(slots=True)
class ReplyCounts:
    """One subscription's replies since the broker started: published, de-duplicated (a retried
    delivery's reply), refused (policy, validation, unreadable), with the last refusal."""

    published: int = 0
    duplicates: int = 0
    refused: int = 0
    last_refusal: str | None = None
    last_refusal_at: float | None = None

    def document(self) -> dict[str, Any]:
        """The counts as on ``/status/subscriptions`` (``replies``)."""
        return {
            "published": self.published,
            "duplicates": self.duplicates,
            "refused": self.refused,
            "lastRefusal": self.last_refusal,
        }


class Replies:
    """Publishes the replies of deliveries (see the module)."""

    def __init__(self, publish: Publish, *, max_hops: int, limit: int) -> None:
        self._publish = publish
        self.max_hops = max_hops
        #: Largest reply body read from a sink (the broker's largest event).
        self.limit = limit
        #: Counts per subscription id.
        self.counts: dict[str, ReplyCounts] = {}

    def counts_of(self, subscription: str) -> ReplyCounts:
        """The counts of ``subscription`` (created on first use)."""
        counts = self.counts.get(subscription)
        if counts is None:
            counts = self.counts[subscription] = ReplyCounts()
        return counts

    def forget(self, subscription: str) -> None:
        """Drop the counts of a deleted subscription."""
        self.counts.pop(subscription, None)

    async def publish(
        self, subscription: Subscription, delivered: Sequence[Mapping[str, Any]], reply: Reply
    ) -> None:
        """Publish ``reply`` to the delivery of ``delivered`` (one event, or a batch).

        Returns once the reply is committed (or counted as refused). Raises :class:`HopLimit`
        when the chain is too long, and a retryable :class:`DeliveryError` when the reply could
        not be committed (the delivery must then be retried, not completed).
        """
        counts = self.counts_of(subscription.id)
        if reply.problem is not None:
            self._refuse(counts, reply.problem)
            return
        if not reply.events:
            return
        hops = max(hops_of(event) for event in delivered) + 1
        if hops > self.max_hops:
            raise HopLimit(
                f"the sink's reply would be hop {hops} of a reply chain; at most {self.max_hops}"
                " are allowed (--reply-max-hops)"
            )
        # A batch's answer is correlated with the batch's first event.
        request_id = delivered[0].get("id") if delivered else None
        events: list[dict[str, Any]] = []
        for event in reply.events:
            out = dict(event)
            out[HOPS] = hops
            if IN_REPLY_TO not in out and request_id is not None:
                out[IN_REPLY_TO] = request_id
            events.append(out)
        try:
            result = await self._publish(events, subscription.tenant)
        except (Forbidden, ValidationError) as exc:
            self._refuse(counts, str(exc))
            return
        except Overloaded as exc:
            raise DeliveryError(f"the sink's reply cannot be accepted yet: {exc}", retryable=True) from exc
        except Exception as exc:  # storage failed: the reply is not committed, so neither is the delivery
            raise DeliveryError(f"the sink's reply could not be committed: {exc!r}", retryable=True) from exc
        counts.published += result.accepted - result.duplicates
        counts.duplicates += result.duplicates

    @staticmethod
    def _refuse(counts: ReplyCounts, reason: str) -> None:
        counts.refused += 1
        counts.last_refusal = f"reply refused: {reason}"[:1000]
        counts.last_refusal_at = time.time()
