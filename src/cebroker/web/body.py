"""Reading a JSON request body: media type (415), size limit (413), syntax (400)."""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any

from starlette.requests import ClientDisconnect, Request

from cebroker.errors import FieldProblem, PayloadTooLarge, UnsupportedMediaType, ValidationError

#: Media types a subscription may be sent as.
SUBSCRIPTION_MEDIA_TYPES = ("application/json", "application/cloudevents-subscription+json")


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
    """The whole body, refusing (413) as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes; the limit is {limit} bytes")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise PayloadTooLarge(f"the body is over the limit of {limit} bytes")
    except ClientDisconnect as exc:  # nobody will read the answer; keep it out of the error log
        raise _malformed("the client disconnected before the body was complete") from exc
    return bytes(body)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate member {key[:64]!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses as inf, which no JSON answer could carry
        raise ValueError(f"the number {text[:32]} is out of range")
    return value


def parse_json(raw: bytes) -> Any:
    """Parse ``raw`` as strict JSON (no duplicate members, no NaN/Infinity); 400 if it is not."""
    if not raw.strip():
        raise _malformed("the body is empty; send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _malformed(f"the body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        value = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_finite
        )
        # A \ud800 escape yields a lone surrogate: not text, and neither SQLite nor a UTF-8
        # answer could hold it.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return value
    except UnicodeEncodeError as exc:
        raise _malformed("the JSON contains a \\u escape of an unpaired surrogate") from exc
    except json.JSONDecodeError as exc:
        raise _malformed(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise _malformed("the JSON is nested too deeply") from exc
    except ValueError as exc:  # duplicate members, NaN, integers too long to convert
        raise _malformed(f"invalid JSON: {exc}") from exc


def _malformed(message: str) -> ValidationError:
    return ValidationError([FieldProblem("", message)], message)


async def read_json(
    request: Request, *, limit: int, accepted: Collection[str] = SUBSCRIPTION_MEDIA_TYPES
) -> Any:
    """Check the media type, read at most ``limit`` bytes and parse them as JSON."""
    check_media_type(request, accepted)
    return parse_json(await read_limited(request, limit))
