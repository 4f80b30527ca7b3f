"""Serves the console's page and assets.

``GET /console`` answers the one HTML page (the pages inside it are addressed by the URL
fragment, ``/console#/subscriptions``), ``/console/assets/...`` the scripts and the stylesheet.
Every answer carries a Content-Security-Policy that allows scripts, styles and connections to
this origin only, so data shown on a page (a sink URL, an event) can never run as code.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

STATIC = Path(__file__).parent / "static"

#: Only this origin's scripts, styles, images and API; no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class _Assets(StaticFiles):
    """The static files, with the security headers and revalidation on every load."""

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update({**SECURITY_HEADERS, "Cache-Control": "no-cache"})
        return response


class ConsoleComponent:
    """The console as a part of the broker: routes only, nothing to start or stop."""

    def routes(self) -> Sequence[BaseRoute]:
        """``/console``, ``/console/`` and ``/console/assets/...``."""
        return [
            Route("/console", self._page, methods=["GET", "HEAD"]),
            Route("/console/", self._slash, methods=["GET", "HEAD"]),
            Mount("/console/assets", app=_Assets(directory=STATIC), name="console-assets"),
        ]

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

    async def _slash(self, request: Request) -> Response:
        return RedirectResponse("/console", status_code=308)
