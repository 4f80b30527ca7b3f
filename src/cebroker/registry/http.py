"""HTTP details of the xRegistry binding: request flags, bodies, ``xRegistry-*`` headers, responses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

from ceprotocols.errors import BindingError
from ceprotocols.headers import percent_decode
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from cebroker.errors import ValidationError
from cebroker.registry import jsonout
from cebroker.registry.errors import XRegistryError
from cebroker.registry.model import SPEC_VERSION
from cebroker.registry.paths import Target, inlinable
from cebroker.registry.query import Inline, parse_filters
from cebroker.registry.service import RawDocument, ReadOptions
from cebroker.registry.writes import IGNORABLE
from cebroker.web.body import parse_json_body, read_limited

JSON_MEDIA = "application/json; charset=utf-8"
HEADER_PREFIX = "xregistry-"
#: largest accepted request body (a whole registry document on import)
MAX_BODY = 16 * 1024 * 1024


def link_header(base: str) -> dict[str, str]:
    """The ``Link`` header every registry response carries."""
    return {"Link": f"<{base}/>;rel=xregistry-root"}


def json_response(body: Any, status: int, headers: Mapping[str, str]) -> Response:
    """A JSON response in the registry's media type. (Input never holds an unpaired surrogate;
    should a stored string hold one, it is written as its ``\\uXXXX`` escape, not a 500.)"""
    data = json.dumps(body, ensure_ascii=False, indent=2).encode("utf-8", "backslashreplace")
    return Response(data, status_code=status, media_type=JSON_MEDIA, headers=dict(headers))


def pieces_response(pieces: list[bytes], status: int, headers: Mapping[str, str]) -> Response:
    """A JSON answer already encoded in pieces (:func:`cebroker.registry.jsonout.pieces`),
    sent one piece after the other."""

    async def send() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return StreamingResponse(send(), status_code=status, media_type=JSON_MEDIA, headers=dict(headers))


async def json_answer(body: Any, status: int, headers: Mapping[str, str]) -> Response:
    """A JSON response in the registry's media type, encoded off the event loop (see
    :func:`encode_json`): the answers of reads and writes, whose size the registry decides."""
    data = await asyncio.to_thread(jsonout.encode_json, body)
    return Response(data, status_code=status, media_type=JSON_MEDIA, headers=dict(headers))


def read_options(request: Request, target: Target) -> ReadOptions:
    """The ``inline``, ``filter`` and ``doc`` flags of a request (``bad_inline`` for a path that
    names nothing inlinable at ``target``)."""
    q = request.query_params
    check_specversion(request, target.xid)
    inline = Inline.parse(q.getlist("inline")) if "inline" in q else Inline([])
    inline.validate(inlinable(target))
    return ReadOptions(inline=inline, doc="doc" in q, branches=parse_filters(q.getlist("filter")))


def check_specversion(request: Request, subject: str) -> None:
    """``unsupported_specversion`` for a ``?specversion`` other than the one served."""
    value = request.query_params.get("specversion")
    if value is not None and value.lower() != SPEC_VERSION:
        raise XRegistryError("unsupported_specversion", subject, specversion=value)


def ignore_flags(request: Request) -> frozenset[str]:
    """The ``?ignore`` values (``?ignore`` alone ignores every supported one)."""
    if "ignore" not in request.query_params:
        return frozenset()
    values = {
        v.strip() for raw in request.query_params.getlist("ignore") for v in raw.split(",") if v.strip()
    }
    return frozenset(values & IGNORABLE) if values else IGNORABLE


def epoch_flag(request: Request, subject: str) -> int | None:
    """The ``?epoch=N`` of a delete."""
    value = request.query_params.get("epoch")
    if value is None:
        return None
    if not value.isdigit():
        raise XRegistryError("bad_flag", subject, flag=f"epoch={value}")
    return int(value)


async def read_body(request: Request) -> bytes:
    """The raw body, refused (413) past :data:`MAX_BODY`."""
    return await read_limited(request, MAX_BODY)


async def parse_json(data: bytes, subject: str, *, required: bool = True) -> Any:
    """The JSON body, read within the service's input limits; ``missing_body`` when empty and
    required, ``parsing_data`` (naming the field and the limit) when it is not acceptable JSON."""
    if not data.strip():
        if required:
            raise XRegistryError("missing_body", subject)
        return None
    try:
        return await parse_json_body(data)
    except ValidationError as exc:
        raise XRegistryError(
            "parsing_data", subject, error_detail=exc.detail, problems=exc.problems
        ) from None


def header_attributes(request: Request, subject: str) -> dict[str, Any]:
    """Attributes given as ``xRegistry-<name>`` headers (maps as ``xRegistry-<map>-<key>``)."""
    attrs: dict[str, Any] = {}
    for name, raw in request.headers.items():
        if not name.lower().startswith(HEADER_PREFIX):
            continue
        key = name[len(HEADER_PREFIX) :].lower()
        if not key:
            raise XRegistryError("header_error", subject, name=name, error_detail="no attribute name")
        try:
            value: Any = percent_decode(raw)
        except BindingError as exc:
            raise XRegistryError("header_error", subject, name=name, error_detail=str(exc)) from None
        if key in ("epoch",) and value.isdigit():
            value = int(value)
        elif key == "defaultversionsticky":
            value = value.lower() == "true"
        elif value == "null":
            value = None
        for sep in ("-", "."):
            if sep in key:
                outer, inner = key.split(sep, 1)
                entries = attrs.setdefault(outer, {})
                if not isinstance(entries, dict):
                    raise XRegistryError(
                        "header_error",
                        subject,
                        name=name,
                        error_detail=f"{outer} given as a value and as a map",
                    )
                entries[inner] = value
                break
        else:
            if key in attrs:
                raise XRegistryError(
                    "header_error", subject, name=name, error_detail=f"{key} given as a value and as a map"
                )
            attrs[key] = value
    return attrs


def has_xregistry_headers(request: Request) -> bool:
    """True when the request carries any ``xRegistry-*`` header."""
    return any(n.lower().startswith(HEADER_PREFIX) for n in request.headers)


def _header_value(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, bool) else str(value)
    # percent-encode what a header cannot carry as is (spec: space, '"', '%', non-printable)
    return quote(text, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%'))


def document_response(doc: RawDocument, status: int, base_headers: Mapping[str, str], rid: str) -> Response:
    """A document with its scalar attributes as ``xRegistry-*`` headers (303 when external)."""
    headers = dict(base_headers)
    for key, value in doc.attrs.items():
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(v, (dict, list)):
                    headers[f"xRegistry-{key}-{k}"] = _header_value(v)
        elif not isinstance(value, list) and value is not None:
            headers[f"xRegistry-{key}"] = _header_value(value)
    headers["Content-Location"] = doc.content_location
    headers["Content-Disposition"] = rid
    if doc.data is None:
        if doc.location:
            headers["Location"] = doc.location
            return Response(status_code=303, headers=headers)
        return Response(b"", status_code=status, headers=headers)
    media = str(doc.attrs.get("contenttype") or "application/octet-stream")
    return Response(doc.data, status_code=status, media_type=media, headers=headers)
