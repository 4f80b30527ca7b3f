"""Broker events: CloudEvents the broker publishes about itself (docs/broker-events.md).

Each has the broker's own ``source`` (``/cebroker`` and the broker's public URL, the same on
every instance), a type beginning :data:`RESERVED` and JSON ``data``; the extension
:data:`TENANT` names the tenant it concerns (absent: it concerns no tenant). They enter through
the same ingest as any publish, as the broker itself (no publish policy), so validation, the
registry, de-duplication, the archive and matching apply.

* **Tenants see only their own.** A tenant's subscription never matches a broker event of another
  tenant, nor one that concerns no tenant (:func:`isolation_filter`, conjoined with the
  subscription's filters in the index, replays included); subscriptions without a tenant (an
  admin's) see all.
* **Reserved types.** No one but the broker publishes a type beginning :data:`RESERVED` (403).
* **Never blocking.** :meth:`BrokerEvents.emit` only puts the event on a bounded queue; a task
  ingests it (holding it while the storage is unavailable). A full queue, or an ingest that
  refuses it, drops the event and counts it (``cebroker_broker_events_total{outcome="dropped"}``)
  with a warning: never silently.
* **No recursion without bound.** A broker event's dead letter emits no broker event.
* **Once across instances.** Events every instance sees (a subscription change, a circuit opened
  in the shared store) have an id derived from what they describe, so de-duplication keeps one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter

from cebroker.broker_events import RESERVED, TENANT
from cebroker.contracts import IngestResult
from cebroker.errors import Overloaded
from cebroker.storage.errors import StorageUnavailable

log = logging.getLogger("cebroker.pipeline")

#: Events waiting to be ingested at most; more are dropped (and counted).
QUEUE_SIZE = 10_000
#: Events ingested together at most.
CHUNK = 100
#: Seconds between two tries of ingesting events while the storage is unavailable.
RETRY = 1.0

#: Ingests the broker's own events (no publish policy).
Publish = Callable[[Sequence[dict[str, Any]]], Awaitable[IngestResult]]


def is_reserved(event: Mapping[str, Any]) -> bool:
    """Whether ``event``'s type is one only the broker publishes."""
    kind = event.get("type")
    return isinstance(kind, str) and kind.startswith(RESERVED)


def isolation_filter(tenant: str) -> dict[str, Any]:
    """The filter conjoined with every subscription of ``tenant``: any event that is not a broker
    event, and the broker events of ``tenant`` only."""
    quoted = tenant.replace("'", "''")
    return {"sql": f"NOT (type LIKE 'dev.cebroker.%') OR {TENANT} = '{quoted}'"}


class BrokerEvents:
    """Emits broker events without blocking and ingests them from a task (see the module).

    Args:
        source: the ``source`` of every broker event.
        enabled: false: :meth:`emit` does nothing (``--broker-events off``).
        counter: counts events by outcome (``emitted``, ``dropped``).
    """

    def __init__(self, publish: Publish, *, source: str, enabled: bool, counter: Counter) -> None:
        self._publish = publish
        self.source = source
        self.enabled = enabled
        self._counter = counter
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self._task: asyncio.Task[None] | None = None

    def emit(self, kind: str, data: Mapping[str, Any], *, tenant: str | None, key: str | None = None) -> None:
        """Queue the broker event ``dev.cebroker.<kind>`` with ``data`` about ``tenant``.
        ``key``: what makes it unique across instances (its id derives from it); else a new id."""
        if not self.enabled:
            return
        event: dict[str, Any] = {
            "specversion": "1.0",
            "id": f"{kind}/{key}" if key is not None else str(uuid.uuid4()),
            "source": self.source,
            "type": RESERVED + kind,
            "time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "datacontenttype": "application/json",
            "data": dict(data),
        }
        if tenant is not None:
            event[TENANT] = tenant
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self._dropped(1, "the queue is full")
        else:
            self._counter.labels("emitted").inc()

    def start(self) -> None:
        """Ingest queued events from now on."""
        if self._task is None and self.enabled:
            self._task = asyncio.create_task(self._run(), name="cebroker-broker-events")

    async def stop(self) -> None:
        """Ingest what is queued (briefly), then stop."""
        task, self._task = self._task, None
        if task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), 2.0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        left = self._queue.qsize()
        if left:
            self._dropped(left, "the broker stopped before ingesting them")

    async def _run(self) -> None:
        while True:
            events = [await self._queue.get()]
            while len(events) < CHUNK and not self._queue.empty():
                events.append(self._queue.get_nowait())
            try:
                await self._ingest(events)
            finally:
                for _ in events:
                    self._queue.task_done()

    async def _ingest(self, events: list[dict[str, Any]]) -> None:
        """Ingest ``events``; while the storage is unavailable or the broker overloaded, hold
        them and try again every :data:`RETRY` seconds (the queue fills meanwhile, and what
        does not fit is dropped and counted); any other refusal drops them, counted."""
        while True:
            try:
                await self._publish(events)
                return
            except (StorageUnavailable, Overloaded):
                await asyncio.sleep(RETRY)
            except Exception as exc:
                self._dropped(len(events), f"ingest refused them: {exc}")
                return

    def _dropped(self, count: int, why: str) -> None:
        self._counter.labels("dropped").inc(count)
        log.warning("%d broker events dropped: %s", count, why)
