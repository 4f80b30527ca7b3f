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

_TOPIC = {
    "name": "topic",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "A label the broker does not interpret (docs/eventgrid.md).",
}
_SUBSCRIPTION = {
    "name": "subscription",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "The id of a PULL subscription.",
}
_API_VERSION = {
    "name": "api-version",
    "in": "query",
    "required": True,
    "schema": {
        "type": "string",
        "enum": ["2023-06-01-preview", "2023-10-01-preview", "2023-11-01", "2024-06-01"],
    },
}
_EG_TOKENS: Schema = {
    "type": "object",
    "required": ["lockTokens"],
    "properties": {"lockTokens": _TOKENS},
    "additionalProperties": True,
}
_EG_RESULTS: Schema = {
    "type": "object",
    "required": ["failedLockTokens", "succeededLockTokens"],
    "properties": {
        "failedLockTokens": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["lockToken", "error"],
                "properties": {
                    "lockToken": {"type": "string"},
                    "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                    },
                },
            },
        },
        "succeededLockTokens": {"type": "array", "items": {"type": "string"}},
    },
}
_EG_ERRORS = {
    "400": _problem("A parameter or member is missing or invalid (named in the problem)."),
    "404": _problem("No subscription with this id."),
    "409": _problem("The subscription is not a PULL subscription."),
    "413": _problem("The body is over its limit."),
    "415": _problem("The Content-Type is not accepted."),
}


def _eg_settlement(name: str, summary: str, extra: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "parameters": [_TOPIC, _SUBSCRIPTION],
        "post": {
            "operationId": name,
            "summary": summary,
            "tags": ["Event Grid"],
            "parameters": [_API_VERSION, *extra],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _EG_TOKENS}}},
            "responses": {
                "200": {
                    "description": "Which tokens succeeded, which failed and why.",
                    "content": {"application/json": {"schema": _EG_RESULTS}},
                },
                **_EG_ERRORS,
            },
        },
    }


_EG_BASE = "/topics/{topic}/eventsubscriptions/{subscription}"
PATHS.update(
    {
        "/topics/{topic}:publish": {
            "parameters": [_TOPIC],
            "post": {
                "operationId": "eventGridPublish",
                "summary": "Publish one CloudEvent or a batch (Event Grid namespace topic)",
                "tags": ["Event Grid"],
                "parameters": [_API_VERSION],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/cloudevents+json": {"schema": _ref("CloudEvent")},
                        "application/cloudevents-batch+json": {
                            "schema": {"type": "array", "items": _ref("CloudEvent")}
                        },
                    },
                },
                "responses": {
                    "200": {
                        "description": "Accepted (durably).",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "400": _problem("An invalid event or parameter (named in the problem)."),
                    "413": _problem("The body is over its limit."),
                    "415": _problem("The Content-Type is not accepted."),
                    "503": _problem("The broker cannot take events now."),
                },
            },
        },
        _EG_BASE + ":receive": {
            "parameters": [_TOPIC, _SUBSCRIPTION],
            "post": {
                "operationId": "eventGridReceive",
                "summary": "Receive events under a lock (Event Grid shape)",
                "tags": ["Event Grid"],
                "parameters": [
                    _API_VERSION,
                    {
                        "name": "maxEvents",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                    },
                    {
                        "name": "maxWaitTime",
                        "in": "query",
                        "schema": {"type": "number", "minimum": 0, "maximum": 120},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "The events with their broker properties.",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["value"],
                                    "properties": {
                                        "value": {
                                            "type": "array",
                                            "items": {
                                                "type": "object",
                                                "required": ["brokerProperties", "event"],
                                                "properties": {
                                                    "brokerProperties": {
                                                        "type": "object",
                                                        "required": ["lockToken", "deliveryCount"],
                                                        "properties": {
                                                            "lockToken": {"type": "string"},
                                                            "deliveryCount": {"type": "integer"},
                                                        },
                                                    },
                                                    "event": _ref("CloudEvent"),
                                                },
                                            },
                                        }
                                    },
                                }
                            }
                        },
                    },
                    "400": _problem("A parameter is invalid (named in the problem)."),
                    "404": _problem("No subscription with this id."),
                    "409": _problem("The subscription is not a PULL subscription."),
                },
            },
        },
        _EG_BASE + ":acknowledge": _eg_settlement("eventGridAcknowledge", "Acknowledge received events", []),
        _EG_BASE + ":release": _eg_settlement(
            "eventGridRelease",
            "Release received events",
            [
                {
                    "name": "releaseDelayInSeconds",
                    "in": "query",
                    "schema": {"type": "number", "minimum": 0, "maximum": 3600},
                }
            ],
        ),
        _EG_BASE + ":reject": _eg_settlement("eventGridReject", "Reject received events (dead letters)", []),
        _EG_BASE + ":renewLock": _eg_settlement(
            "eventGridRenewLock", "Renew the locks of received events", []
        ),
    }
)
