"""The Subscriptions API over HTTP: ``/subscriptions`` and ``/subscriptions/{id}``.

Create, query, retrieve, replace and delete (Subscriptions API spec, section 3.2.5 "API
Operations" and its HTTP placeholders), with ETags and ``If-Match``, OPTIONS and 405
with ``Allow``. Only the exact paths below are routed here, so sub-resources such as
``/subscriptions/{id}/status`` remain free for other parts of the broker.

A subscription belongs to the tenant of the principal that created it: other tenants' calls
find no such subscription (404, the same answer as for an id that does not exist) and never
list it; an ``admin`` sees every tenant's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cebroker.api.admission import AdmissionRules, realize
from cebroker.api.destinations import DestinationCheck
from cebroker.api.openapi import openapi_document
from cebroker.api.query import next_link, parse_query
from cebroker.api.webhooks import rotate_webhook_secret
from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.errors import NotFound
from cebroker.network import sink_policy
from cebroker.principal import Principal
from cebroker.settings import Settings
from cebroker.storage.subscriptions import InvalidCursor, SubscriptionStore
from cebroker.subscription import WEBHOOK_SECRET, Subscription
from cebroker.web.access import principal_of
from cebroker.web.body import read_json
from cebroker.web.conditional import check_if_match
from cebroker.web.methods import Handler, MethodRouter
from cebroker.web.params import no_parameters
from cebroker.web.problem import request_error

log = logging.getLogger("cebroker.api")

JSON = "application/json"


def _json(doc: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(doc, ensure_ascii=False), status_code=status, media_type=JSON, headers=headers)


class SubscriptionsComponent:
    """The Subscriptions API on top of a :class:`SubscriptionStore` (opened by its own component),
    validating with ``rules`` (built once by the composition root)."""

    def __init__(
        self,
        store: SubscriptionStore,
        settings: Settings,
        rules: AdmissionRules,
        describe: Callable[[], dict[str, Any]] | None = None,
        *,
        destinations: DestinationCheck | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.settings = settings
        self.rules = rules
        # Never unchecked: the settings' own policy unless the composition root passes one.
        self.destinations = destinations or DestinationCheck(sink_policy(settings))
        self._clock = clock
        # The document depends only on the rules, which do not change: built once.
        self._document = openapi_document(rules)
        #: The document served at ``/openapi.json``: the broker's, composed of every part's, when
        #: the composition root sets it; else the Subscriptions API's alone.
        self.describe: Callable[[], dict[str, Any]] = describe or (lambda: self._document)
        self._collection: dict[str, Handler] = {
            "GET": self._query,
            "HEAD": self._query,
            "POST": self._create,
            "OPTIONS": self._options,
        }
        self._item: dict[str, Handler] = {
            "GET": self._retrieve,
            "HEAD": self._retrieve,
            "PUT": self._replace,
            "DELETE": self._delete,
            "OPTIONS": self._options,
        }

    def routes(self) -> Sequence[BaseRoute]:
        """The collection, the item and the OpenAPI document."""
        return [
            Route("/subscriptions", MethodRouter(self._collection)),
            Route("/subscriptions/{id}", MethodRouter(self._item)),
            Route("/openapi.json", self._openapi, methods=["GET", "HEAD"]),
        ]

    async def start(self) -> None:
        """Nothing to start: the store is opened by the store component."""

    async def stop(self) -> None:
        """Nothing to stop."""

    @property
    def _base(self) -> str:
        # Links are relative unless a public base URL is configured: right behind any Host header.
        return self.settings.base_url.rstrip("/") if self.settings.base_url else ""

    def _one(
        self, subscription: Subscription, status: int = 200, head: bool = False, generated: str | None = None
    ) -> Response:
        headers = {"ETag": subscription.etag}
        if status == 201:
            headers["Location"] = f"{self._base}/subscriptions/{subscription.id}"
        doc = subscription.to_json()
        if generated is not None:
            # The one time a generated webhook secret is shown: the answer to its create or replace.
            doc["protocolsettings"][WEBHOOK_SECRET] = generated
        response = _json(doc, status, headers)
        if head:
            response.body = b""  # HEAD: the headers of the GET response (Content-Length included)
        return response

    async def _options(self, request: Request) -> Response:
        return Response(status_code=200)

    async def _query(self, request: Request) -> Response:
        query = dataclasses.replace(
            parse_query(request.query_params), tenant=principal_of(request).tenant_filter
        )
        try:
            page = await self.store.query(query)
        except InvalidCursor as exc:
            raise request_error("parameter", "cursor", str(exc)) from exc
        headers = {}
        if page.next_cursor is not None:
            headers["Link"] = next_link(self._base, query, page.next_cursor)
        response = _json([s.to_json() for s in page.items], headers=headers)
        if request.method == "HEAD":
            response.body = b""
        return response

    async def _create(self, request: Request) -> Response:
        no_parameters(request.query_params)
        principal = principal_of(request)
        body = await read_json(request, limit=self.settings.max_subscription_body)
        proposed = realize(body, rules=self.rules, subscription_id=str(uuid.uuid4()))
        await self.destinations.check(proposed)
        subscription, generated = self._secrets(None, dataclasses.replace(proposed, tenant=principal.tenant))
        limit = self.settings.max_subscriptions_per_tenant
        stored = await self.store.create(subscription, max_per_tenant=limit)
        log.info("subscription %s created (protocol %s)", stored.id, stored.protocol)
        return self._one(stored, 201, generated=generated)

    def _secrets(
        self, current: Subscription | None, proposed: Subscription
    ) -> tuple[Subscription, str | None]:
        """``proposed`` with its webhook secret generated if asked for, and the secret it
        replaces kept for the overlap; also the generated secret (shown once) or None."""
        return rotate_webhook_secret(
            current, proposed, now=self._clock.now(), overlap=self.settings.webhook_secret_overlap
        )

    async def _current(self, request: Request, principal: Principal | None = None) -> Subscription:
        subscription_id = request.path_params["id"]
        current = await self.store.get(subscription_id)
        caller = principal or principal_of(request)
        # Another tenant's subscription is answered exactly as one that does not exist.
        if current is None or not caller.sees(current.tenant):
            raise NotFound(f"no subscription with id {subscription_id[:64]!r}")
        return current

    async def _retrieve(self, request: Request) -> Response:
        return self._one(await self._current(request), head=request.method == "HEAD")

    async def _replace(self, request: Request) -> Response:
        subscription_id = request.path_params["id"]
        no_parameters(request.query_params)
        body = await read_json(request, limit=self.settings.max_subscription_body)
        current = await self._current(request)
        proposed = realize(body, rules=self.rules, subscription_id=subscription_id, path_id=subscription_id)
        pinned = check_if_match(request.headers.get("if-match"), current.etag)
        await self.destinations.check(proposed)
        subscription, generated = self._secrets(current, dataclasses.replace(proposed, tenant=current.tenant))
        # Pinned to the revision read, so the retired secret computed from it is the one replaced.
        stored = await self.store.replace(
            subscription, expected_revision=current.revision if pinned else None
        )
        log.info("subscription %s replaced (revision %d)", stored.id, stored.revision)
        return self._one(stored, generated=generated)

    async def _delete(self, request: Request) -> Response:
        no_parameters(request.query_params)
        current = await self._current(request)
        pinned = check_if_match(request.headers.get("if-match"), current.etag)
        gone = await self.store.delete(current.id, expected_revision=current.revision if pinned else None)
        log.info("subscription %s deleted", gone.id)
        return self._one(gone)

    async def _openapi(self, request: Request) -> Response:
        return _json(self.describe())
