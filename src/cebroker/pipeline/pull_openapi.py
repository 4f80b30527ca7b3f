"""Pull delivery's part of the broker's OpenAPI document (docs/pull.md): receive, acknowledge,
release, reject and renew under ``/subscriptions/{id}/``."""

from __future__ import annotations

from typing import Any

from cebroker.pipeline.openapi import Schema

_TOKENS: Schema = {"type": "array", "minItems": 1, "maxItems": 1000, "items": {"type": "string"}}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/problem+json": {"schema": _ref("Problem")}}}


def _settlement(name: str, summary: str, extra: dict[str, Schema]) -> dict[str, Any]:
    schema: Schema = {
        "type": "object",
        "required": ["locktokens"],
        "properties": {"locktokens": _TOKENS, **extra},
        "additionalProperties": False,
    }
    return {
        "parameters": [_ID],
        "post": {
            "operationId": name,
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
            "responses": {
                "200": {
                    "description": "Which tokens succeeded, which failed and why.",
                    "content": {"application/json": {"schema": _ref("PullResults")}},
                },
                "400": _problem(
                    "A member is missing or invalid (named in the problem), or a query parameter."
                ),
                "404": _problem("No subscription with this id."),
                "409": _problem("The subscription is not a PULL subscription."),
                "413": _problem("The body is over its limit."),
                "415": _problem("The Content-Type is not application/json."),
            },
        },
    }


_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "Subscription id.",
}

SCHEMAS: dict[str, Schema] = {
    "PullReceived": {
        "type": "object",
        "required": ["events"],
        "properties": {
            "events": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["locktoken", "deliverycount", "lockeduntil", "event"],
                    "properties": {
                        "locktoken": {"type": "string"},
                        "deliverycount": {"type": "integer", "minimum": 1},
                        "lockeduntil": {"type": "string", "format": "date-time"},
                        "event": _ref("CloudEvent"),
                    },
                    "additionalProperties": False,
                },
            }
        },
        "additionalProperties": False,
    },
    "PullResults": {
        "type": "object",
        "required": ["succeeded", "failed"],
        "properties": {
            "succeeded": {"type": "array", "items": {"type": "string"}},
            "failed": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["locktoken", "reason"],
                    "properties": {
                        "locktoken": {"type": "string"},
                        "reason": {"type": "string", "enum": ["unknown", "expired", "settled"]},
                    },
                    "additionalProperties": False,
                },
            },
        },
        "additionalProperties": False,
    },
}

PATHS: dict[str, Any] = {
    "/subscriptions/{id}/receive": {
        "parameters": [_ID],
        "post": {
            "operationId": "receive",
            "summary": "Receive events of a PULL subscription under a lock (long poll)",
            "parameters": [
                {
                    "name": "max",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10},
                    "description": "At most this many events.",
                },
                {
                    "name": "wait",
                    "in": "query",
                    "schema": {"type": "number", "minimum": 0, "maximum": 60, "default": 0},
                    "description": "Seconds to wait for the first event when none is there.",
                },
            ],
            "responses": {
                "200": {
                    "description": "The events, each with its lock token and delivery count.",
                    "content": {"application/json": {"schema": _ref("PullReceived")}},
                },
                "400": _problem("A query parameter is invalid (named in the problem)."),
                "404": _problem("No subscription with this id."),
                "409": _problem("The subscription is not a PULL subscription."),
            },
        },
    },
    "/subscriptions/{id}/acknowledge": _settlement("acknowledge", "Complete received events", {}),
    "/subscriptions/{id}/release": _settlement(
        "release",
        "Give received events back (due again after delay seconds)",
        {"delay": {"type": "number", "minimum": 0, "maximum": 3600}},
    ),
    "/subscriptions/{id}/reject": _settlement(
        "reject",
        "Move received events to the dead letters",
        {"reason": {"type": "string", "minLength": 1, "maxLength": 1024}},
    ),
    "/subscriptions/{id}/renew": _settlement("renewLock", "Extend the locks of received events", {}),
}
