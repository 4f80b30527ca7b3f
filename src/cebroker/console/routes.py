"""Serves the console's page and assets.

``GET /console`` answers the one HTML page (the pages inside it are addressed by the URL
fragment, ``/console#/subscriptions``), ``/console/assets/...`` the scripts and the stylesheet.
``GET /docs`` is the API reference: Swagger UI, from the ``swagger-ui-bundle-v2`` package, served
under ``/docs/assets/`` and rendering ``/openapi.json``.
Every answer carries a Content-Security-Policy that allows scripts, styles and connections to
this origin only, so data shown on a page (a sink URL, an event) can never run as code.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope
from swagger_ui_bundle import swagger_ui_path

STATIC = Path(__file__).parent / "static"
SWAGGER_UI = Path(str(swagger_ui_path))

#: Only this origin's scripts, styles, images and API; no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


#: Swagger UI sets styles and shows images from data: URLs; otherwise the same limits.
DOCS_HEADERS = {
    **SECURITY_HEADERS,
    "Content-Security-Policy": SECURITY_HEADERS["Content-Security-Policy"]
    .replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
    .replace("img-src 'self'", "img-src 'self' data:"),
}


class _Assets(StaticFiles):
    """The static files, with the security headers and revalidation on every load."""

    def __init__(self, directory: Path, headers: dict[str, str]) -> None:
        super().__init__(directory=directory)
        self._headers = headers

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update({**self._headers, "Cache-Control": "no-cache"})
        return response


class ConsoleComponent:
    """The console as a part of the broker: routes only, nothing to start or stop."""

    def routes(self) -> Sequence[BaseRoute]:
        """``/console``, ``/console/``, ``/console/assets/...``, ``/docs`` and ``/docs/assets/...``."""
        return [
            Route("/console", self._page, methods=["GET", "HEAD"]),
            Route("/console/", self._slash, methods=["GET", "HEAD"]),
            Mount("/console/assets", app=_Assets(STATIC, SECURITY_HEADERS), name="console-assets"),
            Route("/docs", self._docs, methods=["GET", "HEAD"]),
            Mount("/docs/assets", app=_Assets(SWAGGER_UI, DOCS_HEADERS), name="docs-assets"),
        ]

    def openapi(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The console's and the API reference's pages in the broker's OpenAPI document (their
        data comes from the API's own routes, ``/status`` and ``/status/subscriptions`` above all)."""
        html = {"text/html": {"schema": {"type": "string"}}}
        paths: dict[str, Any] = {
            "/console": {
                "get": {
                    "operationId": "console",
                    "summary": "The web console (an HTML page; its pages are addressed by the URL fragment)",
                    "tags": ["console"],
                    "responses": {"200": {"description": "The page.", "content": html}},
                }
            },
            "/console/": {
                "get": {
                    "operationId": "consoleSlash",
                    "summary": "Redirects to /console",
                    "tags": ["console"],
                    "responses": {"308": {"description": "`Location: /console`."}},
                }
            },
            "/docs": {
                "get": {
                    "operationId": "apiReference",
                    "summary": "This document, rendered by Swagger UI",
                    "tags": ["console"],
                    "responses": {"200": {"description": "The page.", "content": html}},
                }
            },
        }
        asset: dict[str, Any] = {
            "get": {
                "operationId": "{}Asset",
                "summary": "A static file of the page (script, stylesheet, image)",
                "tags": ["console"],
                "parameters": [
                    {
                        "name": "path",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    }
                ],
                "responses": {
                    "200": {"description": "The file.", "content": {"*/*": {"schema": {}}}},
                    "404": {
                        "description": "No such file.",
                        "content": {
                            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
                        },
                    },
                },
            }
        }
        for prefix in ("console", "docs"):
            paths[f"/{prefix}/assets/{{path}}"] = copy.deepcopy(asset)
            paths[f"/{prefix}/assets/{{path}}"]["get"]["operationId"] = f"{prefix}Asset"
        return paths, {}

    async def start(self) -> None:
        """Nothing to start."""

    async def stop(self) -> None:
        """Nothing to stop."""

    async def _page(self, request: Request) -> Response:
        return FileResponse(
            STATIC / "index.html",
            media_type="text/html; charset=utf-8",
            headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"},
        )

    async def _docs(self, request: Request) -> Response:
        return FileResponse(
            STATIC / "docs.html",
            media_type="text/html; charset=utf-8",
            headers={**DOCS_HEADERS, "Cache-Control": "no-cache"},
        )

    async def _slash(self, request: Request) -> Response:
        return RedirectResponse("/console", status_code=308)
