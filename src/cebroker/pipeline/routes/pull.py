"""The pull delivery routes of a PULL subscription (docs/pull.md), scope ``events:receive``.

* ``POST /subscriptions/{id}/receive?max=N&wait=T``: up to ``max`` (1..1000, default 10) events,
  waiting up to ``wait`` seconds (0..60, default 0) for the first; each with its lock token.
* ``POST /subscriptions/{id}/acknowledge``, ``.../release``, ``.../reject``, ``.../renew`` with
  ``{"locktokens": [...]}`` (release: optional ``"delay"`` in seconds; reject: optional
  ``"reason"``): which tokens succeeded and which failed, and why.

Another tenant's subscription is "not found"; a subscription that is not PULL is a 409.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.errors import Conflict, FieldProblem, NotFound, ValidationError
from cebroker.pipeline.pull import Puller, Received
from cebroker.storage.pull import TokenResult
from cebroker.storage.subscriptions import SubscriptionStore
from cebroker.subscription import Subscription
from cebroker.web.access import principal_of
from cebroker.web.body import read_json
from cebroker.web.params import no_parameters
from cebroker.web.problem import request_error

MAX_EVENTS = 1000
MAX_WAIT = 60
MAX_TOKENS = 1000
MAX_DELAY = 3600
MAX_REASON = 1024
#: Largest settlement body (a thousand tokens with room to spare).
MAX_BODY = 256 * 1024
MEDIA_TYPES = ("application/json",)


def timestamp(epoch: float) -> str:
    """RFC 3339 UTC with milliseconds."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def number_param(request: Request, name: str, default: float, high: float, *, integer: bool) -> float:
    """A query parameter in ``[0 or 1, high]`` (400 naming it otherwise)."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    low = 1 if integer else 0
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        value = -1
    if not low <= value <= high:
        kind = "an integer" if integer else "a number of seconds"
        raise request_error("parameter", name, f"must be {kind} from {low} to {high}")
    return value


async def pull_subscription(store: SubscriptionStore, request: Request, subscription_id: str) -> Subscription:
    """The caller's PULL subscription ``subscription_id``: 404 for none (or another tenant's),
    409 for one that is not PULL."""
    found = await store.get(subscription_id)
    if found is None or not principal_of(request).sees(found.tenant):
        raise NotFound(f"no subscription {subscription_id[:64]!r}")
    if not found.pull:
        raise Conflict(
            f"subscription {subscription_id[:64]!r} is {found.protocol}: only PULL ones are received"
        )
    return found


def tokens_of(doc: Any, member: str = "locktokens") -> list[str]:
    """The non-empty array of lock tokens ``doc[member]`` (400 naming the member otherwise)."""
    if not isinstance(doc, dict):
        raise ValidationError([FieldProblem("", "must be a JSON object")])
    value = doc.get(member)
    if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
        raise ValidationError(
            [FieldProblem(f"/{member}", "must be a non-empty array of lock tokens (strings)")]
        )
    if len(value) > MAX_TOKENS:
        raise ValidationError([FieldProblem(f"/{member}", f"holds at most {MAX_TOKENS} tokens")])
    return value


def known(doc: dict[str, Any], allowed: Sequence[str]) -> None:
    """Refuse members the call does not take."""
    for name in doc:
        if name not in allowed:
            raise ValidationError(
                [FieldProblem(f"/{name}", f"unknown member; this call takes {', '.join(allowed)}")]
            )


def received_document(item: Received) -> dict[str, Any]:
    """One received event as the native API answers it."""
    return {
        "locktoken": item.token,
        "deliverycount": item.count,
        "lockeduntil": timestamp(item.locked_until),
        "event": item.event,
    }


def results_document(results: Sequence[TokenResult]) -> dict[str, Any]:
    """Per-token results as the native API answers them."""
    return {
        "succeeded": [r.token for r in results if r.error is None],
        "failed": [{"locktoken": r.token, "reason": r.error} for r in results if r.error is not None],
    }


class PullApi:
    """The receive and settlement routes."""

    def __init__(self, store: SubscriptionStore, puller: Puller) -> None:
        self._store = store
        self._puller = puller

    def routes(self) -> Sequence[BaseRoute]:
        """The five routes under ``/subscriptions/{id}/``."""
        return [
            Route("/subscriptions/{id}/receive", self.receive, methods=["POST"]),
            Route("/subscriptions/{id}/acknowledge", self.acknowledge, methods=["POST"]),
            Route("/subscriptions/{id}/release", self.release, methods=["POST"]),
            Route("/subscriptions/{id}/reject", self.reject, methods=["POST"]),
            Route("/subscriptions/{id}/renew", self.renew, methods=["POST"]),
        ]

    async def _subscription(self, request: Request) -> Subscription:
        return await pull_subscription(self._store, request, str(request.path_params["id"]))

    async def receive(self, request: Request) -> Response:
        """Up to ``max`` events under a lock, waiting up to ``wait`` seconds for the first."""
        for name in request.query_params:
            if name not in ("max", "wait"):
                raise request_error("parameter", name[:64], "receive takes 'max' and 'wait' only")
        limit = int(number_param(request, "max", 10, MAX_EVENTS, integer=True))
        wait = number_param(request, "wait", 0.0, MAX_WAIT, integer=False)
        subscription = await self._subscription(request)
        items = await self._puller.receive(subscription, limit, wait)
        return JSONResponse({"events": [received_document(i) for i in items]})

    async def _body(self, request: Request, allowed: Sequence[str]) -> dict[str, Any]:
        no_parameters(request.query_params)
        doc = await read_json(request, limit=MAX_BODY, accepted=MEDIA_TYPES)
        tokens_of(doc)
        known(doc, allowed)
        return dict(doc)

    async def acknowledge(self, request: Request) -> Response:
        """Complete the locked deliveries."""
        doc = await self._body(request, ("locktokens",))
        subscription = await self._subscription(request)
        return JSONResponse(results_document(await self._puller.acknowledge(subscription, doc["locktokens"])))

    async def release(self, request: Request) -> Response:
        """Give the deliveries back, due again after ``delay`` seconds."""
        doc = await self._body(request, ("locktokens", "delay"))
        delay = doc.get("delay")
        if delay is not None and (
            not isinstance(delay, int | float) or isinstance(delay, bool) or not 0 <= delay <= MAX_DELAY
        ):
            raise ValidationError(
                [FieldProblem("/delay", f"must be a number of seconds from 0 to {MAX_DELAY}")]
            )
        subscription = await self._subscription(request)
        results = await self._puller.release(
            subscription, doc["locktokens"], None if delay is None else float(delay)
        )
        return JSONResponse(results_document(results))

    async def reject(self, request: Request) -> Response:
        """Dead-letter the deliveries with ``reason``."""
        doc = await self._body(request, ("locktokens", "reason"))
        reason = doc.get("reason", "rejected by the consumer")
        if not isinstance(reason, str) or not reason or len(reason) > MAX_REASON:
            raise ValidationError(
                [FieldProblem("/reason", f"must be a non-empty string of at most {MAX_REASON}")]
            )
        subscription = await self._subscription(request)
        return JSONResponse(
            results_document(await self._puller.reject(subscription, doc["locktokens"], reason))
        )

    async def renew(self, request: Request) -> Response:
        """Extend the locks by the subscription's lock duration."""
        doc = await self._body(request, ("locktokens",))
        subscription = await self._subscription(request)
        return JSONResponse(results_document(await self._puller.renew(subscription, doc["locktokens"])))
