"""Sample events for binding and delivery tests: every attribute kind, every payload kind."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from ceprotocols.eventform import canonical_string

#: Extensions of every CloudEvents type as they appear in the JSON format.
EXTENSIONS: dict[str, Any] = {
    "strext": 'Euro € 😀 "quoted" 100%',
    "intext": 42,
    "negext": -7,
    "boolext": True,
    "falseext": False,
    "uriext": "https://example.com/a/b?c=d#e",
    "timeext": "2024-05-01T12:30:00.5+02:00",
}

PAYLOADS: dict[str, dict[str, Any]] = {
    "json-object": {"datacontenttype": "application/json", "data": {"n": 1, "s": "é", "l": [1, None]}},
    "json-array": {"datacontenttype": "application/json", "data": [1, "two", {"three": 3}]},
    "json-string": {"datacontenttype": "application/json", "data": "123"},
    "json-implicit": {"data": {"implicit": True}},
    "vendor-json": {"datacontenttype": "application/vnd.order+json; charset=utf-8", "data": {"id": 9}},
    "text": {"datacontenttype": "text/plain; charset=utf-8", "data": "plain text ✓"},
    "binary": {
        "datacontenttype": "application/octet-stream",
        "data_base64": base64.b64encode(bytes(range(256))).decode(),
    },
    "binary-untyped": {"data_base64": base64.b64encode(b"\x00\xff\xfe not json").decode()},
    "no-data": {},
}


def make_event(payload: str = "json-object", **extra: Any) -> dict[str, Any]:
    """A complete event with every optional attribute, :data:`EXTENSIONS` and one payload kind."""
    event: dict[str, Any] = {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": "/sensors/tn-1234567/alerts",
        "type": "com.example.object.deleted.v2",
        "subject": "resource/123",
        "time": "2024-05-01T12:30:00.123Z",
        "dataschema": "https://example.com/schema.json",
        **EXTENSIONS,
        **PAYLOADS[payload],
    }
    event.update(extra)
    return event


def as_strings(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as a header-based binary binding returns it: every attribute value in its
    canonical string form (headers carry no type), the payload unchanged."""
    return {
        name: value if name in ("data", "data_base64") else canonical_string(value)
        for name, value in event.items()
    }
