"""``POST /events``: CloudEvents over HTTP into the pipeline (HTTP Protocol Binding 1.0).

Binary mode (``ce-`` headers, payload as body), structured mode
(``application/cloudevents+json``) and batched mode (``application/cloudevents-batch+json``).
``202 Accepted`` is answered only once every event of the request is committed to disk.

Request-reply (:mod:`cebroker.pipeline.requestreply`): one event (binary or structured) with
``Prefer: wait=<seconds>`` is answered ``200`` with its first reply, in the request's mode, or
``504`` when none came in time (the event is accepted either way); ``Preference-Applied`` names
the wait applied (cut to ``--reply-max-wait``). A batch ignores the preference (202).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from ceprotocols.errors import BindingError
from ceprotocols.http.binding import decode_header, from_binary, to_binary, to_structured
from ceprotocols.jsontext import JsonTextError
from ceprotocols.tracecontext import TraceContext
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from cebroker.errors import FieldProblem, NoReply, PayloadTooLarge, UnsupportedMediaType, ValidationError
from cebroker.pipeline.gcpause import PAUSE
from cebroker.pipeline.ingest import EventIngestor, release
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.requestreply import ReplyWaiters, parse_wait
from cebroker.principal import Principal
from cebroker.telemetry.tracing import transport_context
from cebroker.tenant_policies import TenantPolicies
from cebroker.web.access import principal_of
from cebroker.web.body import PARSE_OFF_LOOP, json_problem, parse_json, parse_json_body, read_limited
from cebroker.web.direct import RawHeaders
from cebroker.web.problem import RequestPartProblem

_STRUCTURED = "application/cloudevents+json"
_STRUCTURED_BYTES = _STRUCTURED.encode()
_BATCH = "application/cloudevents-batch+json"


def accepted_headers(length: int) -> list[tuple[bytes, bytes]]:
    return [(b"content-length", str(length).encode()), (b"content-type", b"application/json")]


class EventsApi:
    """The ingress route; limits are in bytes."""

    def __init__(
        self,
        ingestor: EventIngestor,
        metrics: PipelineMetrics,
        *,
        max_event_size: int,
        max_batch_size: int,
        policies: TenantPolicies | None = None,
        waiters: ReplyWaiters | None = None,
    ) -> None:
        self._waiters = waiters
        self._ingestor = ingestor
        self._policies = policies or TenantPolicies()
        self._metrics = metrics
        self._max_event = max_event_size
        self._max_batch = max_batch_size

    def routes(self) -> Sequence[BaseRoute]:
        """``POST /events``."""
        return [Route("/events", self.post, methods=["POST"])]

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /events`` as a plain ASGI endpoint, for the app's fast lane
        (:class:`cebroker.web.lane.Lane`): the same as :meth:`post`, the answer sent directly."""
        body = await self._accept(Request(scope, receive))
        if isinstance(body, Response):  # request-reply: the reply (200)
            await body(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 202, "headers": accepted_headers(len(body))})
        await send({"type": "http.response.body", "body": body})

    async def post(self, request: Request) -> Response:
        """Decode, validate and durably accept the events of one request."""
        body = await self._accept(request)
        if isinstance(body, Response):  # request-reply: the reply (200)
            return body
        return Response(body, status_code=202, media_type="application/json")

    async def _accept(self, request: Request) -> bytes | Response:
        """The body of the 202 answer, once every event of the request is committed; with
        ``Prefer: wait`` on one event, the whole answer (the reply)."""
        paused: list[bool] = []
        try:
            try:
                events, batch = await self._decode(request, paused)
            except (PayloadTooLarge, UnsupportedMediaType, ValidationError) as exc:
                self._metrics.events_rejected.labels(type(exc).__name__.lower()).inc()
                raise
            principal = principal_of(request)
            permit = self.permit(principal)
            # The request's trace context is read only when tracing.
            transport = transport_context(request.headers) if self._ingestor.traced else None
            wait = parse_wait(request.headers.get("prefer")) if self._waiters is not None else None
            if wait is not None and not batch and isinstance(events[0], dict):
                return await self._request_reply(
                    request, events[0], permit, principal.tenant, wait, transport
                )
            # De-duplicated per publishing tenant: one tenant cannot suppress another's events.
            # Counts its own refusals.
            result = await self._ingestor.accept(
                events,
                batch=batch,
                permit=permit,
                tenant=principal.tenant,
                transport=transport,
                protocol="http",
            )
            await release(events)
        finally:
            if paused:  # a large batch held off full garbage collections (see pipeline.gcpause)
                PAUSE.release()
        return orjson.dumps({"accepted": result.accepted, "duplicates": result.duplicates})

    async def _request_reply(
        self,
        request: Request,
        event: dict[str, Any],
        permit: Callable[[dict[str, Any]], bool] | None,
        tenant: str | None,
        wait: float,
        transport: TraceContext | None,
    ) -> Response:
        """Accept ``event``, then wait up to ``wait`` seconds (at most the broker's limit) for
        its first reply: 200 with it, in the request's mode, or 504."""
        waiters = self._waiters
        assert waiters is not None  # only called with request-reply on
        applied = min(wait, waiters.max_wait)
        preference = {"Preference-Applied": f"wait={applied:g}"}
        with waiters.expect(str(event.get("id"))) as future:
            await self._ingestor.accept(
                [event], batch=False, permit=permit, tenant=tenant, transport=transport, protocol="http"
            )
            try:
                reply = await asyncio.wait_for(future, applied)
            except TimeoutError:
                error = NoReply(
                    f"the event (id {str(event.get('id'))[:200]!r}) was accepted, but no reply came"
                    f" within {applied:g}s; a later reply is delivered as any event"
                )
                error.headers = preference
                raise error from None
        structured = request.headers.get("content-type", "").split(";", 1)[0].strip().lower() == _STRUCTURED
        try:
            message = to_structured(reply) if structured else to_binary(reply)
        except BindingError:  # a reply that binary mode cannot carry goes structured
            message = to_structured(reply)
        return Response(message.body, status_code=200, headers={**message.headers, **preference})

    def direct_events(self, headers: RawHeaders, content_type: bytes, body: bytes) -> list[Any] | None:
        """The one event of a request that :meth:`_accept` reads without an error and without
        leaving the event loop (a structured or binary single event, at most
        :data:`~cebroker.web.body.PARSE_OFF_LOOP` bytes), else None: the app is then to read
        it (see :class:`~cebroker.pipeline.routes.direct.DirectEvents`)."""
        if len(body) > PARSE_OFF_LOOP or len(body) > self._max_event:
            return None
        media = content_type.split(b";", 1)[0].strip().lower()
        if media == _STRUCTURED_BYTES:
            try:
                event = parse_json(body)
            except ValidationError:
                return None
            return [event] if isinstance(event, dict) else None
        if media.startswith(b"application/cloudevents"):
            return None
        fields = Headers(raw=list(headers))
        if "ce-specversion" not in fields or _header_problems(fields):
            return None
        try:
            return [from_binary(fields, body)]
        except BindingError:
            return None

    def permit(self, principal: Principal) -> Callable[[dict[str, Any]], bool] | None:
        """The publish policy of ``principal``'s tenant, or None when it is not restricted."""
        tenant = principal.tenant
        if principal.admin or tenant is None or tenant not in self._policies.tenants:
            return None
        policies = self._policies

        def permit(event: dict[str, Any]) -> bool:
            return policies.may_publish(tenant, event)

        return permit

    async def _decode(self, request: Request, paused: list[bool]) -> tuple[list[Any], bool]:
        content_type = request.headers.get("content-type", "")
        media = content_type.split(";", 1)[0].strip().lower()
        if media == _BATCH:
            body = await read_limited(request, self._max_batch)
            if len(body) <= PARSE_OFF_LOOP:
                return self._batch(body), True
            PAUSE.acquire()
            paused.append(True)
            # Parsing and measuring a large batch runs on a worker thread (see parse_json_body).
            return await asyncio.to_thread(self._batch, body), True
        if media.startswith("application/cloudevents"):
            if media != _STRUCTURED:
                raise UnsupportedMediaType(f"unsupported event format {media!r}; use {_STRUCTURED}")
            body = await read_limited(request, self._max_event)
            event = await parse_json_body(body)
            if not isinstance(event, dict):
                raise ValidationError([FieldProblem("", "a structured message holds one JSON object")])
            return [event], False
        if "ce-specversion" not in request.headers:
            raise UnsupportedMediaType(
                f"content type {content_type or '(none)'!r} without ce- headers is not a CloudEvent; "
                f"send binary mode (ce-specversion, ce-id, ...), {_STRUCTURED} or {_BATCH}"
            )
        _check_headers(request)
        body = await read_limited(request, self._max_event)
        try:
            if len(body) <= PARSE_OFF_LOOP:
                return [from_binary(request.headers, body)], False
            return [await asyncio.to_thread(from_binary, request.headers, body)], False
        except BindingError as exc:  # a body that is not what its Content-Type says
            cause = exc.__cause__
            if isinstance(cause, JsonTextError):
                problem = json_problem(cause, "/data")
            else:
                problem = FieldProblem("/data", str(exc))
            raise ValidationError([problem]) from None

    def _batch(self, body: bytes) -> list[Any]:
        """The events of a batch body, each within the event size limit."""
        events = parse_json(body)
        if not isinstance(events, list):
            raise ValidationError([FieldProblem("", "a batch is a JSON array of events")])
        if len(body) > self._max_event:
            for index, event in enumerate(events):
                size = len(orjson.dumps(event))
                if size > self._max_event:
                    raise PayloadTooLarge(
                        f"event /{index} is {size} bytes, over the limit of {self._max_event}"
                    )
        return events


def _header_problems(headers: Headers) -> list[FieldProblem]:
    """Each ``ce-`` header that is not what the HTTP binding allows (percent-encoded UTF-8)."""
    problems: list[FieldProblem] = []
    for name, value in headers.items():
        if name.startswith("ce-"):
            try:
                decode_header(value)
            except BindingError as exc:
                problems.append(RequestPartProblem("", str(exc), part="header", name=name))
    return problems


def _check_headers(request: Request) -> None:
    """Every ``ce-`` header must be what the HTTP binding allows (percent-encoded UTF-8)."""
    problems = _header_problems(request.headers)
    if problems:
        detail = "; ".join(f"header {p.to_json()['header']}: {p.message}" for p in problems)
        raise ValidationError(problems, detail)
