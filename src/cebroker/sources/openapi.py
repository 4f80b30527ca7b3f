"""The sources' part of the broker's OpenAPI document: ``/sources`` and
``/sources/{name}/rejects``."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: Schema) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/problem+json": {"schema": _ref("Problem")}}}


_COUNT: Schema = {"type": "integer", "minimum": 0}

SCHEMAS: dict[str, Schema] = {
    "Source": {
        "type": "object",
        "required": ["name", "protocol", "consuming", "downSeconds", "received", "accepted", "invalid"],
        "properties": {
            "name": {"type": "string", "description": "`?name=` of its URL, else `<scheme>-<position>`."},
            "protocol": {"type": "string", "description": "The URL's scheme (the URL itself is not shown)."},
            "consuming": {"type": "boolean", "description": "Subscribed and polling its server."},
            "downSeconds": {"type": ["number", "null"], "description": "How long it has not been consuming."},
            "received": _COUNT,
            "accepted": _COUNT,
            "invalid": _COUNT,
            "restarts": _COUNT,
            "rejectsUrl": {"type": "string"},
        },
        "additionalProperties": False,
    },
    "Reject": {
        "type": "object",
        "required": ["seq", "time", "reason", "size", "headers", "truncated"],
        "properties": {
            "seq": {"type": "integer", "minimum": 1},
            "time": {"type": "string", "format": "date-time"},
            "reason": {"type": "string"},
            "size": {"type": "integer", "minimum": -1, "description": "Payload bytes (-1: unknown)."},
            "headers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "value"],
                    "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                    "additionalProperties": False,
                },
            },
            "payload": {"type": "string", "description": "The first 4 KiB, when they are UTF-8 text."},
            "payloadBase64": {"type": "string", "description": "The first 4 KiB otherwise."},
            "truncated": {"type": "boolean"},
        },
        "additionalProperties": False,
    },
    "RejectPage": {
        "type": "object",
        "required": ["source", "items", "dropped", "next"],
        "properties": {
            "source": {"type": "string"},
            "items": {"type": "array", "items": _ref("Reject")},
            "dropped": {**_COUNT, "description": "Refused messages dropped to keep within the bounds."},
            "next": {"type": ["integer", "null"], "description": "`after` of the next page."},
        },
        "additionalProperties": False,
    },
}

PATHS: dict[str, Any] = {
    "/sources": {
        "get": {
            "operationId": "sources",
            "summary": "The protocol sources, their health and counters",
            "responses": {"200": _json("Every source.", {"type": "array", "items": _ref("Source")})},
        }
    },
    "/sources/{name}/rejects": {
        "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
        "get": {
            "operationId": "sourceRejects",
            "summary": "The messages a source refused, oldest first (kept in memory, bounded)",
            "parameters": [
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
                },
                {
                    "name": "after",
                    "in": "query",
                    "required": False,
                    "description": "Only those with a greater `seq` (`next` of the previous page).",
                    "schema": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1, "default": 0},
                },
            ],
            "responses": {
                "200": _json("The page.", _ref("RejectPage")),
                "400": _problem("`limit` or `after` out of range, or an unknown parameter."),
                "404": _problem("No source has this name."),
            },
        },
    },
}
