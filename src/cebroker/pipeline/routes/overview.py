"""The broker at a glance, for the console and for operators' scripts.

* ``GET /status``: events in, deliveries by outcome, the durable backlog and the dead letters
  stored, since the broker started (counters) or now (backlog, dead letters, the archive's
  size, oldest event and retention).
* ``GET /status/subscriptions``: every subscription with its delivery health: delivered,
  failed attempts, pending, dead-lettered, the last error, the last confirmed delivery and the
  sink's circuit.

Counters restart from zero with the broker, like the Prometheus metrics they are read from;
per-subscription counts come from the durable log and survive restarts, except the time of the
last confirmed delivery, which is kept in memory.

``/status/subscriptions`` grows with the number of subscriptions: its items are built and
encoded a slice of :data:`SLICE` at a time, with a pause for the event loop in between, so a
broker with many subscriptions keeps answering other calls meanwhile. Each slice's items become
bytes at once and are dropped: they never live long enough to reach the oldest generation of
the garbage collector, whose growth would set off a full collection (hundreds of milliseconds
with tens of thousands of subscriptions in memory) during the answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from prometheus_client import Counter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.pipeline.dispatch import Dispatcher
from cebroker.pipeline.dispatch.replies import Replies
from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.redaction import redact_userinfo
from cebroker.pipeline.routes.circuit import circuit_document
from cebroker.storage.archive import EventArchive
from cebroker.storage.circuits import CircuitStore
from cebroker.storage.stats import DeliveryStats, SubscriptionCounts
from cebroker.subscription import Subscription
from cebroker.web.access import principal_of


def timestamp(epoch: float | None) -> str | None:
    """RFC 3339 UTC with milliseconds, as the rest of the API writes times."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _by_label(counter: Counter, label: str) -> dict[str, float]:
    """A counter's totals summed per value of ``label`` (over every other label)."""
    totals: dict[str, float] = {}
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                key = sample.labels.get(label, "")
                totals[key] = totals.get(key, 0.0) + sample.value
    return totals


#: Subscriptions whose items ``/status/subscriptions`` builds between two pauses for the loop.
SLICE = 100
#: The counts of a subscription the log holds nothing of.
NOTHING_COUNTED = SubscriptionCounts()


class OverviewApi:
    """Broker-wide and per-subscription delivery health."""

    def __init__(
        self,
        metrics: PipelineMetrics,
        journal: DeliveryStats,
        circuits: CircuitStore,
        matcher: Matcher,
        dispatcher: Dispatcher,
        archive: EventArchive | None = None,
        replies: Replies | None = None,
    ) -> None:
        self._replies = replies
        self._archive = archive
        self._metrics = metrics
        self._log = journal
        self._circuits = circuits
        self._matcher = matcher
        self._dispatcher = dispatcher
        self._started = time.time()

    def routes(self) -> Sequence[BaseRoute]:
        """``GET /status`` and ``GET /status/subscriptions``."""
        return [
            Route("/status", self.overview, methods=["GET"]),
            Route("/status/subscriptions", self.subscriptions, methods=["GET"]),
        ]

    async def overview(self, request: Request) -> Response:
        """Totals of the whole broker."""
        # The log's read first: the counts and the backlog below are then read together, with
        # no wait between them (a completion write that lands in a wait counts its deliveries as
        # delivered and takes them off the backlog at once: read across it, the two disagree).
        statuses = await self._log.statuses()
        received = _by_label(self._metrics.events_in, "outcome")
        rejected = sum(_by_label(self._metrics.events_rejected, "reason").values())
        outcomes = _by_label(self._metrics.deliveries, "outcome")
        matched = sum(_by_label(self._metrics.matches, "").values())
        doc: dict[str, Any] = {
            "startedAt": timestamp(self._started),
            "uptime": round(time.time() - self._started, 3),
            "subscriptions": len(self._matcher.subscriptions),
            "events": {
                "accepted": int(received.get("accepted", 0)),
                "duplicates": int(received.get("duplicate", 0)),
                "rejected": int(rejected),
                "matched": int(matched),
            },
            "deliveries": {
                "delivered": int(outcomes.get("delivered", 0)),
                "retried": int(outcomes.get("retry", 0)),
                "deadlettered": int(outcomes.get("deadlettered", 0)),
            },
            "backlog": self._dispatcher.pending,
            "deadletters": sum(s.deadlettered for s in statuses.values()),
        }
        if self._archive is not None:
            stats = await self._archive.stats()
            doc["archive"] = {
                "events": stats.events,
                "bytes": stats.bytes,
                "oldest": timestamp(stats.oldest),
                "retention": self._archive.retention,
            }
        return JSONResponse(doc, headers={"Cache-Control": "no-store"})

    async def subscriptions(self, request: Request) -> Response:
        """Every subscription the caller may see (its tenant's; every one for an admin) with its
        delivery health, in creation order."""
        principal = principal_of(request)
        statuses = await self._log.statuses()
        circuits = await self._circuits.circuits()
        last = self._metrics.last_delivered
        visible = [sub for sub in self._matcher.subscriptions.values() if principal.sees(sub.tenant)]
        chunks: list[bytes] = []
        for start in range(0, len(visible), SLICE):
            if start:
                await asyncio.sleep(0)  # let other calls run between slices
            items = [self._health(sub, statuses, circuits, last) for sub in visible[start : start + SLICE]]
            if self._replies is not None:
                for item in items:
                    counts = self._replies.counts.get(item["id"])
                    if counts is not None:
                        item["replies"] = counts.document()
            chunks.append(orjson.dumps(items)[1:-1])  # the items, without the array's brackets
        body = b'{"items":[' + b",".join(chunks) + b"]}"
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    @staticmethod
    def _health(
        sub: Subscription,
        statuses: Mapping[str, SubscriptionCounts],
        circuits: Mapping[str, Any],
        last: Mapping[str, float],
    ) -> dict[str, Any]:
        """One item of ``/status/subscriptions``."""
        status = statuses.get(sub.id, NOTHING_COUNTED)
        return {
            "id": sub.id,
            "protocol": sub.protocol,
            "sink": redact_userinfo(sub.sink),
            "source": sub.source,
            "types": list(sub.types) if sub.types is not None else None,
            "delivered": status.delivered,
            "failed": status.failed,
            "pending": status.pending,
            "deadlettered": status.deadlettered,
            "lastError": status.last_error,
            "lastErrorAt": timestamp(status.last_error_at),
            "lastDeliveredAt": timestamp(last.get(sub.id)),
            "circuit": circuit_document(circuits.get(sub.id)),
        }
