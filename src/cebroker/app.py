"""The ASGI application: composes the broker's parts and maps errors onto problem+json.

Each part of the service (subscriptions API, event pipeline, registry, ...) is a
:class:`Component`: it contributes routes and has a start/stop lifecycle. ``build_components``
is the one place where the parts are created and wired to each other, and
:func:`admission_rules` the one place where the Subscriptions API learns what the other parts
declare about subscriptions.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ceprotocols.egress import Resolver, system_resolver
from ceprotocols.receiver import Limits
from ceprotocols.registry import SenderFactory
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cebroker.api.admission import AdmissionRules, build_rules, realize
from cebroker.api.destinations import DestinationCheck
from cebroker.api.ops import IncompleteRequests, OpsComponent
from cebroker.api.subscriptions import SubscriptionsComponent
from cebroker.auth.component import AccessComponent
from cebroker.auth.middleware import AccessMiddleware
from cebroker.auth.scopes import PUBLIC, required_scope
from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.errors import BrokerError, IncompleteRequest
from cebroker.network import sink_policy
from cebroker.pipeline.component import PipelineComponent
from cebroker.pipeline.delivery_rules import SUBSCRIPTION_RULES as PIPELINE_RULES
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.routes.direct import DirectEvents
from cebroker.pipeline.sender_rules import SUBSCRIPTION_RULES as SENDER_RULES
from cebroker.registry.component import RegistryComponent
from cebroker.registry.validation import RegistryValidator
from cebroker.sealing.cipher import Sealer
from cebroker.sealing.keys import key_ring
from cebroker.sealing.store import SealedSubscriptionStore
from cebroker.settings import Settings
from cebroker.sources.component import SourcesComponent
from cebroker.storage import Storage, StorageOptions, create_storage
from cebroker.telemetry import Telemetry, TelemetryConfig, build_telemetry
from cebroker.tenant_policies import load_tenant_policies
from cebroker.web.lane import Answering, Handler, Lane
from cebroker.web.problem import PROBLEM_MEDIA_TYPE, problem, problem_from_error

log = logging.getLogger("cebroker")


class Component(Protocol):
    """A part of the service with routes and a lifecycle."""

    def routes(self) -> Sequence[BaseRoute]:
        """The HTTP routes this part serves (may be empty)."""
        ...

    async def start(self) -> None:
        """Open stores, start background tasks. Called in dependency order."""
        ...

    async def stop(self) -> None:
        """Stop background tasks and release resources. Called in reverse order."""
        ...


@runtime_checkable
class Described(Protocol):
    """A component whose routes have a part in the broker's OpenAPI document."""

    def openapi(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Its paths and its component schemas."""
        ...


def openapi_document(parts: Sequence[object], rules: AdmissionRules) -> dict[str, Any]:
    """The broker's OpenAPI document: the Subscriptions API's (its settings schemas from
    ``rules``), with every other part's paths and schemas merged in (a name defined twice is a
    bug, refused here)."""
    from cebroker.api.openapi import openapi_document as subscriptions_document

    doc = subscriptions_document(rules)
    doc["info"]["title"] = "cebroker"
    doc["info"]["description"] = (
        "CloudEvents broker: the Subscriptions API, event ingress (binary, structured and batch "
        "content modes), delivery status, dead letters and redrive, explaining a match, live tails, "
        "broker status, metrics, health, the xRegistry and the web console."
    )
    for part in parts:
        if not isinstance(part, Described):
            continue
        paths, schemas = part.openapi()
        for kind, mine, theirs in (
            ("path", doc["paths"], paths),
            ("schema", doc["components"]["schemas"], schemas),
        ):
            clash = set(mine) & set(theirs)
            if clash:
                raise ValueError(f"{type(part).__name__} defines the {kind}s {sorted(clash)} again")
            mine.update(copy.deepcopy(theirs))
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method != "parameters" and "tags" not in operation:
                operation["tags"] = [_tag(path)]
            if method != "parameters":
                _describe_access(path, method, operation)
    return doc


_UNAUTHORIZED = {
    "description": "No credentials, or credentials not accepted (with WWW-Authenticate: Bearer).",
    "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
}
_FORBIDDEN = {
    "description": "The credentials lack the scope this operation needs (named in `detail`).",
    "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
}


def _describe_access(path: str, method: str, operation: dict[str, Any]) -> None:
    """What the access rules add to an operation: nothing for a public one (no credentials
    needed), else 401 and 403 (src/cebroker/auth/scopes.py decides, the document follows)."""
    if required_scope(method.upper(), path) == PUBLIC:
        operation["security"] = []
        return
    responses = operation.setdefault("responses", {})
    responses.setdefault("401", copy.deepcopy(_UNAUTHORIZED))
    responses.setdefault("403", copy.deepcopy(_FORBIDDEN))


def _tag(path: str) -> str:
    """The group an operation is listed under in the rendered document."""
    if path.endswith("/explain"):
        return "explain"
    if path.startswith("/subscriptions/{id}/"):
        return "deliveries"
    if path.startswith("/subscriptions"):
        return "subscriptions"
    if path == "/events":
        return "events"
    return "operations"


class StorageComponent:
    """Opens the storage at start-up and closes it at shutdown; serves no routes.

    It comes first in ``build_components`` so that every other part finds the storage open,
    and so it is closed after every part that uses it has stopped.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def routes(self) -> Sequence[BaseRoute]:
        """No routes: the storage is reached through the parts that use it."""
        return ()

    async def start(self) -> None:
        """Open the storage (creating the database on first start)."""
        await self.storage.open()

    async def stop(self) -> None:
        """Close the storage."""
        await self.storage.close()


def storage_from_settings(settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> Storage:
    """The storage the settings name, not yet prepared or opened, stamping times with ``clock``."""
    options = StorageOptions(
        dedup_window=settings.dedup_window,
        clock=clock,
        lease=settings.instance_lease,
        retention=settings.retention,
    )
    return create_storage(settings.db, options)


def secrets_sealer(settings: Settings) -> Sealer:
    """The sealer of stored secrets: the key file the settings name, else ``<db>.key`` (created
    on first start). Raises ConfigurationError when the key cannot be had."""
    ring, _ = key_ring(settings.secrets_key, settings.db)
    return Sealer(ring)


def admission_rules() -> AdmissionRules:
    """The Subscriptions API's rules: its own, plus the settings and ``config`` keys the pipeline
    (retry policy, HTTP content mode) and its senders (content modes, Kafka key) declare."""
    return build_rules(PIPELINE_RULES, SENDER_RULES)


def build_components(
    settings: Settings,
    storage: Storage | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    resolver: Resolver = system_resolver,
    sealer: Sealer | None = None,
    senders: Mapping[str, SenderFactory] | None = None,
) -> list[Component]:
    """Create every part of the broker, wired to each other, in start order.

    ``sealer`` (default :func:`secrets_sealer`) seals the secrets the subscription store keeps.
    ``storage`` defaults to the one the settings name (:func:`storage_from_settings`); every part gets
    the contract it needs from it. ``resolver`` resolves the host names of destinations for the
    network policy (tests inject one that maps names to any address). The pipeline schedules
    deliveries and retries on ``clock``; a storage made here stamps times with it too (a storage
    passed in must use the same clock).

    ``senders`` maps protocol names to sender factories that take the place of the built-in
    ones (the test suite's in-memory sender); no setting reaches it, so a broker run by the
    command line always delivers with the real senders.
    """
    storage = storage if storage is not None else storage_from_settings(settings, clock=clock)
    # One network policy for both checks of every destination: at subscription time (the API)
    # and at connect time (every sender); ``resolver`` turns names into addresses for both.
    policy = sink_policy(settings)
    # The one subscription store; parts that read or follow subscriptions get this instance. It
    # seals secrets on their way to the backend, whichever it is.
    store = SealedSubscriptionStore(storage.subscriptions, sealer or secrets_sealer(settings))
    rules = admission_rules()
    # The broker's OpenAPI document describes every part, the Subscriptions API included, which
    # serves it: a true cycle, broken by handing the API a function that composes the document
    # on its first call, when every part exists (``components`` is bound below, before any call).
    subscriptions = SubscriptionsComponent(
        store,
        settings,
        rules,
        describe=lambda: document(),
        destinations=DestinationCheck(policy, resolver),
        clock=clock,
    )
    # Built first: a bad API keys file is refused before anything else is made.
    access = AccessComponent(settings)
    # The registry checks incoming events for the pipeline (this validator, the index of its
    # message definitions) and announces its own changes through the pipeline's ingestor: the
    # validator is made first, so each of the two is given what it needs when it is built.
    validator = RegistryValidator()
    # The event pipeline follows the store's change feed, so it starts after the storage is open.
    # Its metrics registry is the broker's: telemetry adds the runtime and HTTP server metrics
    # to it and exports all of it over OTLP when configured.
    metrics = PipelineMetrics()
    telemetry = build_telemetry(TelemetryConfig.resolve(settings, os.environ), metrics.registry)
    pipeline = PipelineComponent(
        settings,
        store,
        storage.deliveries,
        storage.circuits,
        archive=storage.archive,
        validator=validator,
        clock=clock,
        realize=lambda body: realize(body, rules=rules, subscription_id="draft"),
        policy=policy,
        resolver=resolver,
        policies=load_tenant_policies(settings.tenant_policies),
        pull=storage.pull,
        tracing=telemetry.tracing,
        metrics=metrics,
        senders=senders,
        replies=storage.replies,
        health=storage.health,
        claims=storage.claims,
    )
    # Protocol ingress feeds the pipeline's durable ingest path, so it starts after it. (With no
    # sources it only serves an empty GET /sources.)
    sources = SourcesComponent(
        settings.sources,
        pipeline.ingestor,
        metrics=pipeline.metrics.registry,
        limits=Limits(max_size=settings.max_event_size),
        broker_events=pipeline.broker_events,
    )
    registry = RegistryComponent(
        storage.registry,
        settings.public_url,
        ingestor=pipeline.ingestor,
        document_schema=settings.registry_document_schema,
        broker_events=settings.broker_events,
        check_events=settings.event_validation != "off",
        validator=validator,
    )
    from cebroker.console import ConsoleComponent

    # Ops reports ready once every part before it has started, and not ready while the storage
    # is unavailable or a source has been down too long.
    ops = OpsComponent(storage.health, checks=(sources.readiness,))
    pipeline.metrics.registry.register(ops.incomplete)
    components: list[Component] = [
        StorageComponent(storage),
        # Right after the storage (which stays first): stopped after every part that traces, so
        # what they traced while stopping is exported.
        telemetry,
        access,
        subscriptions,
        pipeline,
        sources,
        # The console's pages are fixed paths; they must come before the registry's catch-all ones.
        ConsoleComponent(),
        # The registry serves `/` and `/<group>/...`, so its routes come after every other part's;
        # it announces its changes through the pipeline, so it starts after it.
        registry,
        # Ops comes last: ready means every part before it has started.
        ops,
    ]
    document = functools.cache(lambda: openapi_document(components, rules))  # the parts are fixed now
    return components


async def _broker_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BrokerError)  # registered for BrokerError only
    return problem_from_error(exc)


_HTTP_TITLES = {404: ("Not found", "not-found"), 405: ("Method not allowed", "method-not-allowed")}


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers) if exc.headers else None
    title, suffix = _HTTP_TITLES.get(exc.status_code, ("HTTP error", "http-error"))
    return problem(exc.status_code, title, str(exc.detail), type_suffix=suffix, headers=headers)


async def _incomplete(request: Request, exc: Exception) -> Response:
    counts: IncompleteRequests = request.app.state.incomplete
    counts.count("disconnect")
    log.info("%s %s: %s", request.method, request.url.path[:200], exc)
    return problem(400, IncompleteRequest.title, str(exc), type_suffix=IncompleteRequest.type_suffix)


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(500, "Internal error", "the broker failed to handle this request", type_suffix="internal")


class SendGuard:
    """ASGI middleware: once sending a response has failed, the rest of it is dropped.

    A request whose HTTP framing breaks while the app is answering (a broken chunked body on a
    route that does not read its body) has already been answered ``400`` by the server, which
    then refuses the app's response. Without this guard that refusal surfaces as an exception
    in the app, logged twice with a traceback, for every such request.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        broken = False

        async def guarded(message: Message) -> None:
            nonlocal broken
            if broken:
                return
            try:
                await send(message)
            except Exception as exc:  # the server's own error for a connection it gave up on
                broken = True
                log.debug("response to %s dropped: %s", scope.get("path", "?"), exc)

        await self.app(scope, receive, guarded)


@dataclass(frozen=True, slots=True)
class _EventsLane:
    """What the fast lane for ``POST /events`` needs: its endpoint (behind the same middleware as
    every route), the app's error answers and the route it stands for."""

    endpoint: ASGIApp
    handlers: Mapping[Any, Handler]
    route: BaseRoute | None


class _BrokerApp(Starlette):
    """Starlette with the fast lane for ``POST /events`` (:class:`cebroker.web.lane.Lane`) in
    front of its middleware stack, when ``events`` is given."""

    def __init__(
        self,
        *,
        events: _EventsLane | None,
        routes: Sequence[BaseRoute],
        lifespan: Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]],
        middleware: Sequence[Middleware],
        exception_handlers: Mapping[Any, Handler],
    ) -> None:
        self._events = events
        super().__init__(
            routes=routes, lifespan=lifespan, middleware=middleware, exception_handlers=exception_handlers
        )

    def build_middleware_stack(self) -> ASGIApp:
        """The usual stack, behind the lane."""
        stack = super().build_middleware_stack()
        if self._events is None:
            return stack
        return Lane(
            stack,
            method="POST",
            path="/events",
            endpoint=self._events.endpoint,
            handlers=self._events.handlers,
            route=self._events.route,
        )


def create_app(settings: Settings, components: Sequence[Component] | None = None) -> Starlette:
    """The broker as an ASGI app; ``components`` defaults to :func:`build_components`.

    Every route is behind the access middleware: that of the :class:`AccessComponent` among
    ``components``, or one built from ``settings`` when there is none.
    """
    parts = list(components) if components is not None else build_components(settings)
    access = next((part for part in parts if isinstance(part, AccessComponent)), None)
    if access is None:
        access = AccessComponent(settings)
        parts.insert(0, access)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        started: list[Component] = []
        try:
            for part in parts:
                await part.start()
                started.append(part)
            yield
        finally:
            for part in reversed(started):
                try:
                    await part.stop()
                except Exception:
                    log.exception("stopping %s failed", type(part).__name__)

    # Request metrics (and server spans) wrap the access check, so refused calls are counted too.
    telemetry_middleware = [part.middleware() for part in parts if isinstance(part, Telemetry)]
    routes: list[BaseRoute] = []
    for part in parts:
        routes.extend(part.routes())
    handlers: dict[Any, Handler] = {
        IncompleteRequest: _incomplete,
        BrokerError: _broker_error,
        HTTPException: _http_error,
        Exception: _unexpected_error,
    }
    pipeline = next((part for part in parts if isinstance(part, PipelineComponent)), None)
    events: _EventsLane | None = None
    if pipeline is not None:
        # Single events are the broker's hottest call: they take a lane of their own past the
        # generic stack, through the same middleware (request metrics and spans, then access)
        # and with the same error answers, made inside them as the exception middleware does.
        lane: ASGIApp = AccessMiddleware(
            Answering(pipeline.events.handle, handlers),
            authenticator=access.authenticator,
            metrics_public=access.metrics_public,
        )
        for cls, args, kwargs in reversed(telemetry_middleware):
            lane = cls(lane, *args, **kwargs)
        route = next(
            (
                r
                for r in routes
                if isinstance(r, Route) and r.path == "/events" and "POST" in (r.methods or ())
            ),
            None,
        )
        events = _EventsLane(lane, handlers, route)
    direct: DirectEvents | None = None
    telemetry = next((part for part in parts if isinstance(part, Telemetry)), None)
    if pipeline is not None and (telemetry is None or not telemetry.tracing.enabled):
        # Single events can be served by the HTTP server's protocol itself, past even the lane
        # (cebroker.pipeline.routes.direct); with tracing on, the middleware's spans need the app.
        direct = DirectEvents(
            pipeline.events,
            pipeline.ingestor,
            known=access.authenticator.known,
            needed=required_scope("POST", "/events"),
            metrics=telemetry.http if telemetry is not None else None,
        )
    app = _BrokerApp(
        events=events,
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(SendGuard), *telemetry_middleware, access.middleware()],
        exception_handlers=handlers,
    )
    app.state.settings = settings
    #: The route the HTTP server serves past the app (cebroker.web.direct), or None.
    app.state.direct = direct
    app.state.components = parts
    ops = next((part for part in parts if isinstance(part, OpsComponent)), None)
    app.state.incomplete = ops.incomplete if ops is not None else IncompleteRequests()
    return app
