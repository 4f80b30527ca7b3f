"""The baseline for the ingress benchmark: a bare Starlette endpoint that reads the body and
answers 202, served by the same uvicorn settings as the broker."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def events(request: Request) -> Response:
    await request.body()
    return Response(b'{"accepted":1,"duplicates":0}', status_code=202, media_type="application/json")


async def ready(request: Request) -> Response:
    return Response(b"{}", media_type="application/json")


app = Starlette(routes=[Route("/events", events, methods=["POST"]), Route("/readyz", ready)])
