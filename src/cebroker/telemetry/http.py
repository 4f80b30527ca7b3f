"""HTTP server telemetry: request metrics by route template, and server spans for the
management API.

Every request is counted in ``cebroker_http_server_request_duration_seconds`` (a Prometheus
histogram, exported over OTLP too when that is on) by route *template* (``/subscriptions/{id}``,
never the raw path, which would make a series per id), method and status. With tracing on, every
request except ``POST /events`` (whose events get publish spans of their own) gets a SERVER
span named ``<METHOD> <route template>``, child of the request's ``traceparent`` header.
"""

from __future__ import annotations

import time

from opentelemetry import trace
from prometheus_client import CollectorRegistry, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cebroker.telemetry.tracing import Tracing, transport_context

#: The route label of a request no route matched (a 404).
UNMATCHED = "(unmatched)"
#: Methods counted by name; any other is ``_OTHER`` (the semantic conventions' spelling), so a
#: client cannot make a series per made-up method.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Routes whose requests get no server span (their own spans cover them).
UNTRACED = frozenset({("POST", "/events")})
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class HttpMetrics:
    """The request duration histogram, registered in the broker's metrics registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            "cebroker_http_server_request_duration_seconds",
            "HTTP requests served, by route template, method and status code",
            ["route", "method", "status"],
            buckets=_BUCKETS,
            registry=registry,
        )
        # Each series' child, looked up once: ``labels`` takes a lock and builds its key on
        # every call, which the ingest of single events would pay per request. Bounded: routes
        # are templates, methods and statuses few.
        self._series: dict[tuple[str, str, int], Histogram] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one request."""
        key = (route, method if method in METHODS else "_OTHER", status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self.duration.labels(key[0], key[1], str(status))
        series.observe(seconds)


def route_template(scope: Scope) -> str:
    """The template of the route that served ``scope`` (set by the router), else UNMATCHED."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class HttpTelemetry:
    """ASGI middleware: see the module docstring."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics, tracing: Tracing) -> None:
        self.app = app
        self._metrics = metrics
        self._tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        answer = _Answer()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.status = message["status"]
            await send(message)

        if not self._tracing.enabled or (scope["method"], scope["path"]) in UNTRACED:
            try:
                await self.app(scope, receive, sending)
            finally:
                self._observe(scope, answer.status, started)
            return
        method = scope["method"] if scope["method"] in METHODS else "_OTHER"
        headers = {
            k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in _TRACE_HEADERS
        }
        # The template is known once the router has run: the span is named after.
        span = self._tracing.server(
            method, UNMATCHED, scope.get("scheme", "http"), transport_context(headers)
        )
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=True, set_status_on_exception=True):
                await self.app(scope, receive, sending)
        finally:
            route = route_template(scope)
            span.update_name(f"{method} {route}")
            span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", answer.status)
            if answer.status >= 500:
                span.set_status(trace.Status(trace.StatusCode.ERROR))
            span.end()
            self._observe(scope, answer.status, started)

    def _observe(self, scope: Scope, status: int, started: float) -> None:
        self._metrics.observe(route_template(scope), scope["method"], status, time.perf_counter() - started)


class _Answer:
    """The status of the response being sent (500 until the app starts one)."""

    status = 500


_TRACE_HEADERS = (b"traceparent", b"tracestate")
