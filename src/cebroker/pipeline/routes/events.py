"""``POST /events``: CloudEvents over HTTP into the pipeline (HTTP Protocol Binding 1.0).

Binary mode (``ce-`` headers, payload as body), structured mode
(``application/cloudevents+json``) and batched mode (``application/cloudevents-batch+json``).
``202 Accepted`` is answered only once every event of the request is committed to disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from ceprotocols.errors import BindingError
from ceprotocols.http.binding import from_binary
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cebroker.errors import FieldProblem, PayloadTooLarge, UnsupportedMediaType, ValidationError
from cebroker.pipeline.ingest import Pipeline
from cebroker.pipeline.metrics import PipelineMetrics

_STRUCTURED = "application/cloudevents+json"
_BATCH = "application/cloudevents-batch+json"


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        if int(declared) > limit:
            raise PayloadTooLarge(f"request body of {declared} bytes is over the limit of {limit}")
        return await request.body()  # the server enforces the declared length
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(body: bytes, kind: type, shape: str) -> Any:
    """Parse a structured or batch body. The JSON is read here (with orjson, the hot path of
    batch ingress) rather than by the binding's ``from_structured``/``from_batch``; the rules
    are the same."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValidationError([FieldProblem("", f"body is not valid JSON: {exc}")]) from exc
    if not isinstance(doc, kind):
        raise ValidationError([FieldProblem("", shape)])
    return doc


class EventsApi:
    """The ingress route; limits are in bytes."""

    def __init__(
        self, pipeline: Pipeline, metrics: PipelineMetrics, *, max_event_size: int, max_batch_size: int
    ) -> None:
        self._pipeline = pipeline
        self._metrics = metrics
        self._max_event = max_event_size
        self._max_batch = max_batch_size

    def routes(self) -> Sequence[BaseRoute]:
        """``POST /events``."""
        return [Route("/events", self.post, methods=["POST"])]

    async def post(self, request: Request) -> Response:
        """Decode, validate and durably accept the events of one request."""
        try:
            events, batch = await self._decode(request)
        except (PayloadTooLarge, UnsupportedMediaType, ValidationError) as exc:
            self._metrics.events_rejected.labels(type(exc).__name__.lower()).inc()
            raise
        result = await self._pipeline.accept(events, batch=batch)
        body = {"accepted": result.accepted, "duplicates": result.duplicates}
        return Response(orjson.dumps(body), status_code=202, media_type="application/json")

    async def _decode(self, request: Request) -> tuple[list[Any], bool]:
        content_type = request.headers.get("content-type", "")
        media = content_type.split(";", 1)[0].strip().lower()
        if media == _BATCH:
            body = await _read_body(request, self._max_batch)
            events = _parse(body, list, "a batch is a JSON array of events")
            if len(body) > self._max_event:
                self._check_sizes(events)
            return events, True
        if media.startswith("application/cloudevents"):
            if media != _STRUCTURED:
                raise UnsupportedMediaType(f"unsupported event format {media!r}; use {_STRUCTURED}")
            body = await _read_body(request, self._max_event)
            return [_parse(body, dict, "a structured message holds one JSON object")], False
        if "ce-specversion" not in request.headers:
            raise UnsupportedMediaType(
                f"content type {content_type or '(none)'!r} without ce- headers is not a CloudEvent; "
                f"send binary mode (ce-specversion, ce-id, ...), {_STRUCTURED} or {_BATCH}"
            )
        body = await _read_body(request, self._max_event)
        try:
            return [from_binary(request.headers, body)], False
        except BindingError as exc:
            # Either a ce- header that is not valid percent-encoded UTF-8, or a body that is not
            # what its Content-Type says.
            pointer = "/data" if str(exc).startswith("payload") else ""
            raise ValidationError([FieldProblem(pointer, str(exc))]) from exc

    def _check_sizes(self, events: list[Any]) -> None:
        for index, event in enumerate(events):
            size = len(orjson.dumps(event))
            if size > self._max_event:
                raise PayloadTooLarge(f"event /{index} is {size} bytes, over the limit of {self._max_event}")
