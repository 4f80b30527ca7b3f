"""How ``cebroker serve`` logs: text lines for people, or one JSON object per line for log
shippers, for the broker's own loggers and uvicorn's alike.

JSON lines carry ``time`` (RFC 3339, UTC), ``level``, ``logger`` and ``message``, plus
``exc_info`` for an exception; access lines (``--access-log on``) also carry ``client``,
``method``, ``path``, ``http_version`` and ``status``. A line written while a span is current
(telemetry on: a traced request, a delivery attempt) also carries ``trace_id`` and ``span_id``
(lower-case hex, as trace backends show them), so a log line leads to its trace. Request bodies
and headers are never logged, so neither are credentials or bearer tokens.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ACCESS_LOGGER = "uvicorn.access"


class AccessFields(logging.Filter):
    """Copies the fields of uvicorn's access records (its log arguments) onto the record, so that
    a JSON line has them as members rather than only inside the message."""

    _NAMES = ("client", "method", "path", "http_version", "status")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == len(self._NAMES):
            for name, value in zip(self._NAMES, args, strict=True):
                setattr(record, name, value)
        return True


class TraceFields(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` of the current span (when there is a valid one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = f"{context.trace_id:032x}"
            record.span_id = f"{context.span_id:016x}"
        return True


def logging_config(level: str, log_format: str) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` document for the broker and uvicorn.

    Args:
        level: one of ``critical``, ``error``, ``warning``, ``info``, ``debug``.
        log_format: ``text`` or ``json``.
    """
    if log_format == "json":
        formatter: dict[str, Any] = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": ["levelname", "name", "message"],
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",
            "json_ensure_ascii": False,
        }
    else:
        formatter = {"format": TEXT_FORMAT}
    handler = {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "filters": {"access": {"()": AccessFields}, "trace": {"()": TraceFields}},
        "handlers": {
            "default": {**handler, "filters": ["trace"]} if log_format == "json" else handler,
            "access": {**handler, "filters": ["access"], "stream": "ext://sys.stdout"},
        },
        "root": {"handlers": ["default"], "level": level.upper()},
        "loggers": {
            # uvicorn's own loggers go through the root handler, in the same format.
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            ACCESS_LOGGER: {"handlers": ["access"], "propagate": False},
        },
    }
