"""Per-subscription delivery state: status, dead letters and their re-drive.

* ``GET /subscriptions/{id}/status``: delivered, failed (attempts), pending and dead-lettered
  counts, the last error and the sink's circuit; with ``config.reply: publish``, ``replies``:
  the sink's replies published, de-duplicated and refused (with the last refusal) since the
  broker started (this instance's counts).
* ``GET /subscriptions/{id}/deadletters?limit=&after=``: dead letters oldest first, each with the
  event and the reason; ``next`` is the ``after`` value of the following page.
* ``POST /subscriptions/{id}/deadletters/redrive``: deliver dead letters again through the same
  subscription; an optional JSON body ``{"ids": [..]}`` picks some, otherwise all are re-driven.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.errors import FieldProblem, NotFound, ValidationError
from cebroker.pipeline.dispatch import Dispatcher
from cebroker.pipeline.routes.circuit import circuit_document
from cebroker.storage.circuits import CircuitStore
from cebroker.storage.deliveries import DeliveryLog
from cebroker.storage.pull import LockStats
from cebroker.storage.stats import SubscriptionCounts
from cebroker.storage.subscriptions import SubscriptionStore
from cebroker.subscription import Subscription
from cebroker.web.access import principal_of
from cebroker.web.body import parse_json_body, read_limited
from cebroker.web.params import no_parameters

MAX_PAGE = 500
#: Largest redrive body (a list of dead-letter ids).
MAX_REDRIVE_BODY = 1024 * 1024


def _timestamp(epoch: float | None) -> str | None:
    """RFC 3339 UTC with milliseconds, as the rest of the API writes times."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def counts_document(counts: SubscriptionCounts) -> dict[str, Any]:
    """A subscription's counts as the status document names them (``lastErrorAt`` still in
    epoch seconds)."""
    return {
        "delivered": counts.delivered,
        "failed": counts.failed,
        "pending": counts.pending,
        "deadlettered": counts.deadlettered,
        "deadletteredTotal": counts.deadlettered_total,
        "lastError": counts.last_error,
        "lastErrorAt": counts.last_error_at,
    }


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ValidationError([FieldProblem(f"/{name}", f"must be an integer from {low} to {high}")])
    return int(raw)


class DeliveriesApi:
    """Status and dead-letter routes of subscriptions."""

    def __init__(
        self,
        store: SubscriptionStore,
        journal: DeliveryLog,
        circuits: CircuitStore,
        dispatcher: Dispatcher,
        locks: Callable[[str], Awaitable[LockStats]] | None = None,
    ) -> None:
        self._locks = locks
        self._store = store
        self._log = journal
        self._circuits = circuits
        self._dispatcher = dispatcher

    def routes(self) -> Sequence[BaseRoute]:
        """The three routes under ``/subscriptions/{id}/``."""
        return [
            Route("/subscriptions/{id}/status", self.status, methods=["GET"]),
            Route("/subscriptions/{id}/deadletters", self.dead_letters, methods=["GET"]),
            Route("/subscriptions/{id}/deadletters/redrive", self.redrive, methods=["POST"]),
        ]

    async def lookup(self, request: Request) -> str:
        """The subscription of a per-subscription request, with the checks every such route
        makes (404 when there is no such subscription for the caller)."""
        return await self._subscription(request)

    async def _subscription(self, request: Request) -> str:
        return (await self._found(request)).id

    async def _found(self, request: Request) -> Subscription:
        subscription_id = str(request.path_params["id"])
        found = await self._store.get(subscription_id)
        # Another tenant's subscription is answered exactly as one that does not exist.
        if found is None or not principal_of(request).sees(found.tenant):
            raise NotFound(f"no subscription {subscription_id[:64]!r}")
        return found

    async def status(self, request: Request) -> Response:
        """Delivery counts, the last error and the circuit; for a PULL subscription also the
        deliveries locked by consumers now and when the oldest lock began."""
        found = await self._found(request)
        subscription_id = found.id
        doc = counts_document(await self._log.status(subscription_id))
        if found.pull and self._locks is not None:
            stats = await self._locks(subscription_id)
            doc["locked"] = stats.locked
            doc["oldestLockAt"] = _timestamp(stats.oldest_lock)
        doc["lastErrorAt"] = _timestamp(doc["lastErrorAt"])
        doc["circuit"] = circuit_document((await self._circuits.circuits()).get(subscription_id))
        replies = self._dispatcher.replies
        counts = replies.counts.get(subscription_id) if replies is not None else None
        if counts is not None:
            doc["replies"] = counts.document()
        return JSONResponse({"id": subscription_id, **doc})

    async def dead_letters(self, request: Request) -> Response:
        """One page of dead letters."""
        subscription_id = await self._subscription(request)
        limit = _int_param(request, "limit", 100, 1, MAX_PAGE)
        after = _int_param(request, "after", 0, 0, 2**63 - 1)
        page = await self._log.dead_letters(subscription_id, after, limit)
        items: list[dict[str, Any]] = [
            {
                "id": d.id,
                "event": d.event,
                "status": d.status,
                "body": d.body,
                "attempts": d.attempts,
                "lastError": d.last_error,
                "acceptedAt": _timestamp(d.first_at),
                "failedAt": _timestamp(d.failed_at),
            }
            for d in page
        ]
        doc: dict[str, Any] = {"items": items, "next": page[-1].id if len(page) == limit else None}
        return JSONResponse(doc)

    async def redrive(self, request: Request) -> Response:
        """Put dead letters back into delivery."""
        no_parameters(request.query_params)
        subscription_id = await self._subscription(request)
        ids = await self._ids(request)
        count = await self._log.redrive(subscription_id, ids)
        if count:
            self._dispatcher.redriven(subscription_id, count)
        events = self._dispatcher.broker_events
        if events is not None and events.enabled:
            found = await self._store.get(subscription_id)
            events.emit(
                "redrive.done",
                {"subscription": subscription_id, "redriven": count, "chosen": ids is not None},
                tenant=found.tenant if found is not None else None,
            )
        return JSONResponse({"redriven": count}, status_code=202)

    @staticmethod
    async def _ids(request: Request) -> list[int] | None:
        body = await read_limited(request, MAX_REDRIVE_BODY)
        if not body.strip():
            return None
        doc = await parse_json_body(body)
        if not isinstance(doc, dict) or "ids" not in doc:
            raise ValidationError([FieldProblem("/ids", "expected an object with an 'ids' array")])
        ids = doc["ids"]
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValidationError([FieldProblem("/ids", "must be an array of dead-letter ids")])
        return ids
