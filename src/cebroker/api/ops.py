"""Operational endpoints and counters: liveness, readiness, and requests that never completed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.storage.health import StorageHealth

#: A readiness check: the names of what is not ready (empty when all is well).
ReadinessCheck = Callable[[], list[str]]

#: What ``uvicorn`` logs when a connection breaks the HTTP framing.
_INVALID_HTTP = "Invalid HTTP request received."


class IncompleteRequests(Collector):
    """Counts requests that never completed, by kind, as ``cebroker_http_incomplete_requests``:

    * ``disconnect``: the body ended early (the client went away, or its chunked framing broke);
    * ``malformed``: the server could not parse the request's HTTP framing at all.

    A broken chunked body is counted as both: the server sees the framing fail, the broker the
    body end early.
    """

    KINDS = ("disconnect", "malformed")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(self.KINDS, 0)

    def count(self, kind: str) -> None:
        """One more request of ``kind``."""
        self.counts[kind] += 1

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "cebroker_http_incomplete_requests",
            "Requests that ended before they were complete, by kind (disconnect, malformed)",
            labels=["kind"],
        )
        for kind, value in self.counts.items():
            family.add_metric([kind], float(value))
        yield family


class QuietInvalidHttp(logging.Filter):
    """On the ``uvicorn.error`` logger: a request with broken HTTP framing is counted
    (``malformed``) and logged at debug level, so abuse cannot fill the log with warnings."""

    def __init__(self, counts: IncompleteRequests) -> None:
        super().__init__()
        self._counts = counts

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() != _INVALID_HTTP:
            return True
        self._counts.count("malformed")
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger("cebroker").isEnabledFor(logging.DEBUG)


class OpsComponent:
    """Serves ``/healthz`` (the process answers) and ``/readyz`` (every part has started, the
    storage, if given, accepts writes, and every readiness check passes); owns the counts of
    incomplete requests."""

    def __init__(self, health: StorageHealth | None = None, *, checks: Sequence[ReadinessCheck] = ()) -> None:
        self.ready = False
        #: Set on SIGTERM, before the server stops accepting: readiness answers 503 from then on.
        self.stopping = False
        self._health = health
        self.incomplete = IncompleteRequests()
        #: Further readiness checks (e.g. protocol sources that have been down too long).
        self.checks: tuple[ReadinessCheck, ...] = tuple(checks)

    def routes(self) -> Sequence[BaseRoute]:
        """The health routes."""
        return [
            Route("/healthz", self._healthz, methods=["GET"]),
            Route("/readyz", self._readyz, methods=["GET"]),
        ]

    def openapi(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``/healthz`` and ``/readyz`` in the broker's OpenAPI document."""
        health = {
            "type": "object",
            "required": ["status"],
            "properties": {
                "status": {
                    "type": "string",
                    "enum": ["ok", "ready", "starting", "stopping", "unavailable", "not ready"],
                },
                "detail": {"type": "string", "description": "Why the storage is unavailable."},
                "problems": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "What is not ready, e.g. a protocol source that has not been consuming.",
                },
            },
            "additionalProperties": False,
        }
        json = {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}
        paths = {
            "/healthz": {
                "get": {
                    "operationId": "healthz",
                    "summary": "Liveness: the process answers",
                    "responses": {"200": {"description": "`ok`.", "content": json}},
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "summary": "Readiness: every part has started",
                    "responses": {
                        "200": {"description": "`ready`.", "content": json},
                        "503": {
                            "description": "`starting`, `stopping` (once told to stop), `unavailable` while "
                            "the storage is, "
                            "or `not ready` naming the problems (a source down too long).",
                            "headers": {"Retry-After": {"schema": {"type": "string"}}},
                            "content": json,
                        },
                    },
                }
            },
        }
        return paths, {"Health": health}

    async def start(self) -> None:
        """Nothing to open; readiness is set once the app's lifespan has started every part."""
        self.ready = True

    async def stop(self) -> None:
        """Mark the broker as no longer ready."""
        self.ready = False

    async def _healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def stop_soon(self) -> None:
        """The process was told to stop: report not ready (``stopping``) from now on, so that
        load balancers send nothing more while it finishes what it holds."""
        self.stopping = True

    async def _readyz(self, request: Request) -> Response:
        if self.stopping:
            return JSONResponse({"status": "stopping"}, status_code=503)
        if not self.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        cause = self._health.cause if self._health is not None else None
        if cause is not None:
            return JSONResponse(
                {"status": "unavailable", "detail": f"storage unavailable: {cause}"},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        problems = [problem for check in self.checks for problem in check()]
        if problems:
            return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready"})
