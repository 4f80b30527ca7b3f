"""Reading request bodies, the same way on every route: media type (415), size limit (413),
JSON within the input limits of :mod:`ceprotocols.jsontext` (400 naming the field and the limit).

A client that goes away before its body is complete (or breaks the chunked framing, which the
server reports the same way) raises :class:`~cebroker.errors.IncompleteRequest`, which the app
counts and logs in one line: nobody is left to read an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

from cefilters.errors import pointer_token
from ceprotocols import jsontext
from starlette.requests import Request

from cebroker.errors import (
    FieldProblem,
    IncompleteRequest,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationError,
)

#: Media types a subscription may be sent as.
SUBSCRIPTION_MEDIA_TYPES = ("application/json", "application/cloudevents-subscription+json")
#: Bodies larger than this are parsed on a worker thread, so that the event loop keeps serving
#: (a body of this size takes the loop about ten milliseconds).
PARSE_OFF_LOOP = 1024 * 1024


def check_media_type(request: Request, accepted: Collection[str]) -> None:
    """Raise :class:`UnsupportedMediaType` unless the Content-Type is one of ``accepted`` (UTF-8)."""
    header = request.headers.get("content-type")
    wanted = " or ".join(accepted)
    if not header:
        raise UnsupportedMediaType(f"a Content-Type header is required: {wanted}")
    media, *params = (part.strip() for part in header.split(";"))
    if media.lower() not in accepted:
        shown = media if len(media) <= 64 else media[:61] + "..."
        raise UnsupportedMediaType(f"Content-Type {shown!r} is not accepted here; use {wanted}")
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise UnsupportedMediaType("JSON bodies must be UTF-8 (charset=utf-8)")


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, refusing (413) as soon as it is known to exceed ``limit`` bytes: from
    ``Content-Length`` before reading anything, else while the chunks arrive."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes; the limit is {limit} bytes")
    # The server's messages are read directly (not through ``Request.stream``, an async
    # generator per request), and a body that came in one message is returned without a copy.
    receive = request.receive
    body: bytes | bytearray = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            raise IncompleteRequest("the request ended before its body was complete")
        chunk: bytes = message.get("body", b"")
        if body:
            body += chunk
        elif chunk:
            body = chunk if not message.get("more_body", False) else bytearray(chunk)
        if len(body) > limit:
            raise PayloadTooLarge(f"the body is over the limit of {limit} bytes")
        if not message.get("more_body", False):
            return bytes(body) if isinstance(body, bytearray) else body


def json_problem(exc: jsontext.JsonTextError, prefix: str = "") -> FieldProblem:
    """The problem entry for JSON text that broke a limit, located at its field."""
    pointer = prefix + "".join(f"/{pointer_token(part)}" for part in exc.path)
    limit = "" if exc.limit == "syntax" else f" (input limit: {exc.limit})"
    return FieldProblem(pointer, exc.reason + limit)


def parse_json(raw: bytes, *, prefix: str = "") -> Any:
    """Parse ``raw`` with the service's one JSON reader; 400 naming the field otherwise.
    ``prefix`` locates the body's pointers (``/data`` for an event payload)."""
    try:
        return jsontext.loads(raw)
    except jsontext.JsonTextError as exc:
        problem = json_problem(exc, prefix)
        detail = f"{problem.pointer}: {problem.message}" if problem.pointer else problem.message
        raise ValidationError([problem], detail) from None


async def parse_json_body(raw: bytes, *, prefix: str = "") -> Any:
    """:func:`parse_json`, on a worker thread for a large body. The reader's hooks run Python
    code all along, so the thread hands the interpreter back to the event loop every few
    milliseconds instead of holding it for the whole parse."""
    if len(raw) <= PARSE_OFF_LOOP:
        return parse_json(raw, prefix=prefix)
    return await asyncio.to_thread(parse_json, raw, prefix=prefix)


async def read_json(
    request: Request, *, limit: int, accepted: Collection[str] = SUBSCRIPTION_MEDIA_TYPES
) -> Any:
    """Check the media type, read at most ``limit`` bytes and parse them as JSON."""
    check_media_type(request, accepted)
    return await parse_json_body(await read_limited(request, limit))
