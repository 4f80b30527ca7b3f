"""A real OTLP/HTTP receiver for the tests: a small HTTP server that decodes what exporters post
to ``/v1/traces`` and ``/v1/metrics`` with the protobuf classes of ``opentelemetry-proto``.

:func:`served_receiver` serves one on a free port of 127.0.0.1 (``receiver.url`` is the base
endpoint an exporter is given); it keeps every span it got (:class:`ReceivedSpan`), the names
of the metrics, and every raw payload (so a test can look for what must never be exported).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from support.waiting import wait_for

#: The OTLP span kinds by their protobuf number.
KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return None if which is None else getattr(value, which)


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, ids as lower-case hex ("" for no parent)."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...]
    service: str


class Receiver:
    """What an OTLP/HTTP receiver got; thread-safe."""

    def __init__(self) -> None:
        self.url = ""
        self.payloads: list[bytes] = []
        self.spans: list[ReceivedSpan] = []
        self.metrics: set[str] = set()
        self._lock = threading.Lock()

    def take(self, path: str, body: bytes) -> bool:
        """Decode and keep one export request; False for an unknown path."""
        if path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            found = []
            for resource in request.resource_spans:
                service = next(
                    (str(_value(a.value)) for a in resource.resource.attributes if a.key == "service.name"),
                    "",
                )
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        found.append(
                            ReceivedSpan(
                                name=span.name,
                                kind=KINDS.get(span.kind, str(span.kind)),
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                links=tuple((link.trace_id.hex(), link.span_id.hex()) for link in span.links),
                                service=service,
                            )
                        )
            with self._lock:
                self.payloads.append(body)
                self.spans.extend(found)
            return True
        if path == "/v1/metrics":
            metrics = ExportMetricsServiceRequest.FromString(body)
            names = {m.name for r in metrics.resource_metrics for s in r.scope_metrics for m in s.metrics}
            with self._lock:
                self.payloads.append(body)
                self.metrics |= names
            return True
        return False

    def named(self, name: str) -> list[ReceivedSpan]:
        """The spans called ``name`` received so far."""
        with self._lock:
            return [span for span in self.spans if span.name == name]

    def in_trace(self, trace_id: str) -> list[ReceivedSpan]:
        """The spans of one trace received so far."""
        with self._lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def wait_spans(self, trace_id: str, name: str, count: int, timeout: float = 20.0) -> list[ReceivedSpan]:
        """Wait until ``count`` spans called ``name`` of ``trace_id`` arrived; those spans."""
        return wait_for(
            lambda: [s for s in self.in_trace(trace_id) if s.name == name],
            lambda spans: len(spans) >= count,
            timeout,
            f"{count} {name!r} span(s) of trace {trace_id}",
        )

    def raw(self) -> bytes:
        """Every payload received, concatenated."""
        with self._lock:
            return b"".join(self.payloads)


@contextmanager
def served_receiver() -> Iterator[Receiver]:
    """A :class:`Receiver` listening on a free port of 127.0.0.1 until the block ends."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            known = receiver.take(self.path, body)
            self.send_response(200 if known else 404)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: the exporter posts every few milliseconds in the tests

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
