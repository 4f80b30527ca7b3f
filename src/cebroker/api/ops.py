"""Operational endpoints: liveness and readiness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.storage.health import StorageHealth


class OpsComponent:
    """Serves ``/healthz`` (the process answers) and ``/readyz`` (every part has started and the
    storage, if given, accepts writes)."""

    def __init__(self, health: StorageHealth | None = None) -> None:
        self.ready = False
        self._health = health

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
                "status": {"type": "string", "enum": ["ok", "ready", "starting", "unavailable"]},
                "detail": {"type": "string", "description": "Why the storage is unavailable."},
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
                            "description": "`starting` (or stopping), or `unavailable` while the storage is.",
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

    async def _readyz(self, request: Request) -> Response:
        if not self.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        cause = self._health.cause if self._health is not None else None
        if cause is not None:
            return JSONResponse(
                {"status": "unavailable", "detail": f"storage unavailable: {cause}"},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        return JSONResponse({"status": "ready"})
