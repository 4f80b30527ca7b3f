"""The Event Grid namespace data-plane routes, a second face of publish and pull delivery
(docs/eventgrid.md).

* ``POST /topics/{topic}:publish``: one CloudEvent (``application/cloudevents+json``) or a batch
  (``application/cloudevents-batch+json``), accepted as ``POST /events`` accepts them; 200 ``{}``.
* ``POST /topics/{topic}/eventsubscriptions/{subscription}:receive?maxEvents=&maxWaitTime=``,
  ``:acknowledge``, ``:release?releaseDelayInSeconds=``, ``:reject``, ``:renewLock`` with
  ``{"lockTokens": [...]}``: the native pull calls of the PULL subscription whose id is
  ``{subscription}``, answered in Event Grid's shapes.

``{topic}`` is a label the broker does not interpret: an event is matched against every
subscription, as on ``POST /events``, and an event subscription is named by its id alone. Every
route needs ``api-version`` (one of :data:`API_VERSIONS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.errors import UnsupportedMediaType
from cebroker.pipeline.pull import Puller, Received
from cebroker.pipeline.routes.events import EventsApi
from cebroker.pipeline.routes.pull import MAX_BODY, MAX_DELAY, number_param, pull_subscription, tokens_of
from cebroker.storage.pull import EXPIRED, SETTLED, TokenResult
from cebroker.storage.subscriptions import SubscriptionStore
from cebroker.subscription import Subscription
from cebroker.web.body import read_json
from cebroker.web.problem import request_error

#: The data-plane API versions whose shapes these routes answer.
API_VERSIONS = ("2023-06-01-preview", "2023-10-01-preview", "2023-11-01", "2024-06-01")
#: Event Grid's bounds: at most 100 events per receive, a wait of at most 120 seconds.
MAX_EVENTS = 100
MAX_WAIT = 120
#: The error of a failed lock token, per reason: Event Grid's code and a message.
ERRORS = {
    EXPIRED: ("TokenLost", "the lock expired before the call"),
    SETTLED: ("TokenAlreadySettled", "the event was already acknowledged, released or rejected"),
}
UNKNOWN_ERROR = ("TokenNotFound", "no event is locked under this token")
_PUBLISH_TYPES = ("application/cloudevents+json", "application/cloudevents-batch+json")
_SETTLE_TYPES = ("application/json",)


def _api_version(request: Request, allowed: Sequence[str]) -> None:
    for name in request.query_params:
        if name not in ("api-version", *allowed):
            raise request_error(
                "parameter", name[:64], f"this call takes api-version and {', '.join(allowed)}"
            )
    version = request.query_params.get("api-version")
    if version not in API_VERSIONS:
        raise request_error("parameter", "api-version", f"is required: one of {', '.join(API_VERSIONS)}")


def _results(results: Sequence[TokenResult]) -> Response:
    failed = []
    for result in results:
        if result.error is not None:
            code, message = ERRORS.get(result.error, UNKNOWN_ERROR)
            failed.append({"lockToken": result.token, "error": {"code": code, "message": message}})
    succeeded = [r.token for r in results if r.error is None]
    return JSONResponse({"failedLockTokens": failed, "succeededLockTokens": succeeded})


def _detail(item: Received) -> dict[str, Any]:
    return {"brokerProperties": {"lockToken": item.token, "deliveryCount": item.count}, "event": item.event}


class EventGridApi:
    """Event Grid namespace routes over the broker's publish and pull calls."""

    def __init__(self, events: EventsApi, store: SubscriptionStore, puller: Puller) -> None:
        self._events = events
        self._store = store
        self._puller = puller

    def routes(self) -> Sequence[BaseRoute]:
        """Publish, and the five calls of an event subscription."""
        base = "/topics/{topic}/eventsubscriptions/{subscription}"
        return [
            Route("/topics/{topic}:publish", self.publish, methods=["POST"]),
            Route(base + ":receive", self.receive, methods=["POST"]),
            Route(base + ":acknowledge", self.acknowledge, methods=["POST"]),
            Route(base + ":release", self.release, methods=["POST"]),
            Route(base + ":reject", self.reject, methods=["POST"]),
            Route(base + ":renewLock", self.renew, methods=["POST"]),
        ]

    async def publish(self, request: Request) -> Response:
        """Accept one event or a batch as ``POST /events`` does; 200 with ``{}``."""
        _api_version(request, ())
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media not in _PUBLISH_TYPES:
            raise UnsupportedMediaType(
                f"publish takes {' or '.join(_PUBLISH_TYPES)}, not {media or '(none)'!r}"
            )
        await self._events.post(request)
        return Response(orjson.dumps({}), status_code=200, media_type="application/json")

    async def _subscription(self, request: Request) -> Subscription:
        return await pull_subscription(self._store, request, str(request.path_params["subscription"]))

    async def receive(self, request: Request) -> Response:
        """Up to ``maxEvents`` (default 1) events, waiting up to ``maxWaitTime`` (default 60) seconds."""
        _api_version(request, ("maxEvents", "maxWaitTime"))
        limit = int(number_param(request, "maxEvents", 1, MAX_EVENTS, integer=True))
        wait = number_param(request, "maxWaitTime", 60.0, MAX_WAIT, integer=False)
        subscription = await self._subscription(request)
        items = await self._puller.receive(subscription, limit, wait)
        return JSONResponse({"value": [_detail(i) for i in items]})

    async def _tokens(self, request: Request, allowed: Sequence[str] = ()) -> list[str]:
        _api_version(request, allowed)
        return tokens_of(await read_json(request, limit=MAX_BODY, accepted=_SETTLE_TYPES), "lockTokens")

    async def acknowledge(self, request: Request) -> Response:
        """Complete the locked events."""
        tokens = await self._tokens(request)
        return _results(await self._puller.acknowledge(await self._subscription(request), tokens))

    async def release(self, request: Request) -> Response:
        """Give the events back, due after ``releaseDelayInSeconds`` (default: none)."""
        tokens = await self._tokens(request, ("releaseDelayInSeconds",))
        delay = (
            number_param(request, "releaseDelayInSeconds", 0.0, MAX_DELAY, integer=False)
            if "releaseDelayInSeconds" in request.query_params
            else None  # the subscription's release delay
        )
        return _results(await self._puller.release(await self._subscription(request), tokens, delay))

    async def reject(self, request: Request) -> Response:
        """Dead-letter the events."""
        tokens = await self._tokens(request)
        subscription = await self._subscription(request)
        return _results(await self._puller.reject(subscription, tokens, "rejected by the consumer"))

    async def renew(self, request: Request) -> Response:
        """Extend the locks by the subscription's lock duration."""
        tokens = await self._tokens(request)
        return _results(await self._puller.renew(await self._subscription(request), tokens))
