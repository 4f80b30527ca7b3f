"""The pipeline's part of the broker's OpenAPI document: ``/events`` in its three content modes,
delivery status, dead letters and their redrive, replays of the archive, explain, the live tail,
the broker status and ``/metrics``.

Each schema states what the routes accept and answer, no more: the test suite fuzzes the whole
document (schemathesis) and checks every answer against it.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]
_INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _problem(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/problem+json": {"schema": _ref("Problem")}},
    }
    if headers:
        answer["headers"] = headers
    return answer


def _json(description: str, schema: Schema) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_OPTIONAL_TEXT: Schema = {"type": ["string", "null"]}
_TIMESTAMP: Schema = {"type": ["string", "null"], "format": "date-time"}

SCHEMAS: dict[str, Schema] = {
    "CloudEvent": {
        "type": "object",
        "description": (
            "A CloudEvent in the JSON event format (CloudEvents 1.0). Attribute names are 1 to 20 "
            "lower-case letters or digits; extension values are strings, booleans or 32-bit "
            "integers; null means absent; `data` and `data_base64` exclude each other."
        ),
        "required": ["specversion", "id", "source", "type"],
        "properties": {
            "specversion": {"const": "1.0"},
            "id": {"type": "string", "minLength": 1},
            "source": {"type": "string", "minLength": 1},
            "type": {"type": "string", "minLength": 1},
            "subject": _OPTIONAL_TEXT,
            "time": {"type": ["string", "null"], "format": "date-time"},
            "datacontenttype": _OPTIONAL_TEXT,
            "dataschema": _OPTIONAL_TEXT,
            "data": {},
            "data_base64": {"type": ["string", "null"], "contentEncoding": "base64"},
        },
        "propertyNames": {"pattern": "^([a-z0-9]{1,20}|data_base64)$"},
        "additionalProperties": {"anyOf": [{"type": ["string", "boolean", "null"]}, _INT32]},
        "not": {"required": ["data", "data_base64"]},
    },
    "Accepted": {
        "type": "object",
        "required": ["accepted", "duplicates"],
        "properties": {
            "accepted": {"type": "integer", "minimum": 0, "description": "Events committed to disk."},
            "duplicates": {
                "type": "integer",
                "minimum": 0,
                "description": "Of them, seen within the de-duplication window: not delivered again.",
            },
        },
        "additionalProperties": False,
    },
    "Circuit": {
        "type": "object",
        "description": (
            "The sink's circuit. It opens after consecutive failures that say the sink is down "
            "(unreachable, no answer within the timeout, 5xx, 408, 429); while it is open the backlog "
            "waits and one probe at a time goes to the sink; the first answer closes it."
        ),
        "required": ["state", "openedAt", "nextProbeAt", "failedProbes", "lastError"],
        "properties": {
            "state": {
                "type": "string",
                "enum": ["closed", "open", "probing"],
                "description": "`probing`: open, with a probe on its way to the sink.",
            },
            "openedAt": {**_TIMESTAMP, "description": "Since when the sink has been unavailable."},
            "nextProbeAt": {**_TIMESTAMP, "description": "When the next probe may go."},
            "failedProbes": {"type": "integer", "minimum": 0, "description": "Since it opened."},
            "lastError": {**_OPTIONAL_TEXT, "description": "Why the sink is considered down."},
        },
        "additionalProperties": False,
    },
    "DeliveryStatus": {
        "type": "object",
        "required": [
            "id",
            "delivered",
            "failed",
            "pending",
            "deadlettered",
            "deadletteredTotal",
            "lastError",
            "lastErrorAt",
            "circuit",
        ],
        "properties": {
            "id": {"type": "string"},
            "delivered": {"type": "integer", "minimum": 0},
            "failed": {"type": "integer", "minimum": 0, "description": "Failed attempts."},
            "pending": {"type": "integer", "minimum": 0},
            "deadlettered": {"type": "integer", "minimum": 0, "description": "Dead letters stored now."},
            "deadletteredTotal": {"type": "integer", "minimum": 0},
            "lastError": _OPTIONAL_TEXT,
            "lastErrorAt": _TIMESTAMP,
            "circuit": _ref("Circuit"),
            "locked": {
                "type": "integer",
                "minimum": 0,
                "description": "PULL subscriptions: deliveries locked by consumers now.",
            },
            "oldestLockAt": {**_TIMESTAMP, "description": "PULL subscriptions: when the oldest lock began."},
        },
        "additionalProperties": False,
    },
    "DeadLetter": {
        "type": "object",
        "required": ["id", "event", "status", "body", "attempts", "lastError", "acceptedAt", "failedAt"],
        "properties": {
            "id": {"type": "integer"},
            "event": {"type": "object", "description": "The event as accepted."},
            "status": {"type": ["string", "null"], "description": "The sink's last status, if it answered."},
            "body": {"type": ["string", "null"], "description": "The first 2 KiB of the sink's answer."},
            "attempts": {"type": "integer", "minimum": 0},
            "lastError": {"type": "string"},
            "acceptedAt": {"type": "string", "format": "date-time"},
            "failedAt": {"type": "string", "format": "date-time"},
        },
        "additionalProperties": False,
    },
    "DeadLetterPage": {
        "type": "object",
        "required": ["items", "next"],
        "properties": {
            "items": {"type": "array", "items": _ref("DeadLetter")},
            "next": {"type": ["integer", "null"], "description": "`after` value of the next page, if any."},
        },
        "additionalProperties": False,
    },
    "Redrive": {
        "type": "object",
        "required": ["ids"],
        "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
    },
    "Redriven": {
        "type": "object",
        "required": ["redriven"],
        "properties": {"redriven": {"type": "integer", "minimum": 0}},
        "additionalProperties": False,
    },
    "Explanation": {
        "type": "object",
        "required": ["matched", "checks"],
        "properties": {
            "matched": {"type": "boolean", "description": "Whether the event would be delivered."},
            "checks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["pointer", "matched", "detail"],
                    "properties": {
                        "pointer": {"type": "string", "description": "JSON Pointer of the condition."},
                        "matched": {"type": "boolean"},
                        "detail": {"type": "string"},
                    },
                    "additionalProperties": False,
                },
            },
            "transform": _ref("TransformOutcome"),
        },
        "additionalProperties": False,
    },
    "TransformOutcome": {
        "type": "object",
        "description": (
            "A transformation's outcome (config.transform), for a matched event of a subscription "
            "that has one: what the sink would receive, the drop, or the failure (docs/transformations.md)."
        ),
        "required": ["outcome"],
        "properties": {
            "outcome": {"type": "string", "enum": ["delivered", "dropped", "failed"]},
            "event": {"type": "object", "description": "The outgoing event (JSON event format)."},
            "delivery": {"type": "object", "description": "The output's $delivery, as applied."},
            "sink": {"type": "string", "description": "Where it goes (an HTTP path applied)."},
            "message": {
                "type": "object",
                "description": "HTTP: the request as encoded (method, headers, body or body_base64).",
            },
            "warnings": {"type": "array", "items": {"type": "string"}},
            "error": {
                "type": "object",
                "required": ["reason", "position"],
                "properties": {
                    "reason": {"type": "string"},
                    "position": {
                        "anyOf": [
                            {"type": "array", "items": {"type": "integer"}},
                            {"type": "integer"},
                            {"type": "string"},
                            {"type": "null"},
                        ]
                    },
                },
            },
        },
        "additionalProperties": False,
    },
    "DraftExplainRequest": {
        "type": "object",
        "required": ["subscription", "event"],
        "properties": {"subscription": _ref("SubscriptionRequest"), "event": _ref("CloudEvent")},
        "additionalProperties": False,
    },
    "BrokerStatus": {
        "type": "object",
        "required": [
            "startedAt",
            "uptime",
            "subscriptions",
            "events",
            "deliveries",
            "backlog",
            "deadletters",
        ],
        "properties": {
            "startedAt": {"type": "string", "format": "date-time"},
            "uptime": {"type": "number", "minimum": 0, "description": "Seconds since the start."},
            "subscriptions": {"type": "integer", "minimum": 0},
            "events": {
                "type": "object",
                "required": ["accepted", "duplicates", "rejected", "matched"],
                "properties": {
                    name: {"type": "integer", "minimum": 0}
                    for name in ("accepted", "duplicates", "rejected", "matched")
                },
                "additionalProperties": False,
            },
            "deliveries": {
                "type": "object",
                "required": ["delivered", "retried", "deadlettered"],
                "properties": {
                    name: {"type": "integer", "minimum": 0}
                    for name in ("delivered", "retried", "deadlettered")
                },
                "additionalProperties": False,
            },
            "backlog": {"type": "integer", "minimum": 0},
            "deadletters": {"type": "integer", "minimum": 0},
            "archive": {
                "type": "object",
                "description": "The events kept for replays (absent when the broker has no archive).",
                "required": ["events", "bytes", "oldest", "retention"],
                "properties": {
                    "events": {"type": "integer", "minimum": 0},
                    "bytes": {"type": "integer", "minimum": 0, "description": "Of the events' JSON."},
                    "oldest": {**_TIMESTAMP, "description": "When the oldest event held was accepted."},
                    "retention": {"type": "number", "minimum": 0, "description": "Seconds (0: off)."},
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    },
    "ReplayRequest": {
        "type": "object",
        "required": ["from"],
        "properties": {
            "from": {"type": "string", "format": "date-time", "description": "Earliest acceptance time."},
            "to": {
                "type": ["string", "null"],
                "format": "date-time",
                "description": "Events accepted before this (default and latest: now; null: now).",
            },
            "filter": {
                "type": "object",
                "description": "One more filter (Subscriptions API syntax) the events must match.",
            },
            "dryrun": {"type": "boolean", "default": False, "description": "Count, deliver nothing."},
        },
        "additionalProperties": False,
    },
    "ReplayCount": {
        "type": "object",
        "required": ["events"],
        "properties": {
            "events": {"type": "integer", "minimum": 0},
            "transformed": {
                "type": "array",
                "description": "With a transformation: the outcomes of the first events replayed.",
                "items": _ref("TransformOutcome"),
            },
        },
        "additionalProperties": False,
    },
    "ReplayStarted": {
        "type": "object",
        "required": ["replay", "events"],
        "properties": {"replay": {"type": "string"}, "events": {"type": "integer", "minimum": 0}},
        "additionalProperties": False,
    },
    "Replay": {
        "type": "object",
        "required": [
            "id",
            "subscription",
            "state",
            "from",
            "to",
            "filter",
            "events",
            "matched",
            "delivered",
            "failed",
            "deadlettered",
            "pending",
            "removed",
            "createdAt",
        ],
        "properties": {
            "id": {"type": "string"},
            "subscription": {"type": "string"},
            "state": {"enum": ["running", "done", "cancelled"]},
            "from": {**_TIMESTAMP, "description": "null: the earliest event held."},
            "to": {"type": "string", "format": "date-time"},
            "filter": {"type": ["object", "null"]},
            "events": {
                "type": ["integer", "null"],
                "minimum": 0,
                "description": "Matching events when it was created (null: a start from config.startfrom).",
            },
            "matched": {"type": "integer", "minimum": 0, "description": "Deliveries queued so far."},
            "delivered": {"type": "integer", "minimum": 0},
            "failed": {"type": "integer", "minimum": 0, "description": "Failed attempts."},
            "deadlettered": {"type": "integer", "minimum": 0},
            "pending": {"type": "integer", "minimum": 0},
            "removed": {"type": "integer", "minimum": 0, "description": "Deliveries a cancel took out."},
            "createdAt": {"type": "string", "format": "date-time"},
        },
        "additionalProperties": False,
    },
    "TailReady": {
        "type": "object",
        "description": "The `data` of a tail's `ready` event: the watch is registered.",
        "required": ["subscription"],
        "properties": {"subscription": {"type": "string"}},
        "additionalProperties": False,
    },
    "TailDropped": {
        "type": "object",
        "description": "The `data` of a tail's `dropped` event: copies skipped as the reader fell behind.",
        "required": ["dropped"],
        "properties": {"dropped": {"type": "integer", "minimum": 1}},
        "additionalProperties": False,
    },
    "SubscriptionHealth": {
        "type": "object",
        "required": [
            "id",
            "protocol",
            "sink",
            "source",
            "types",
            "delivered",
            "failed",
            "pending",
            "deadlettered",
            "lastError",
            "lastErrorAt",
            "lastDeliveredAt",
            "circuit",
        ],
        "properties": {
            "id": {"type": "string"},
            "protocol": _ref("Protocol"),
            "sink": {"type": "string"},
            "source": _OPTIONAL_TEXT,
            "types": {"type": ["array", "null"], "items": {"type": "string"}},
            "delivered": {"type": "integer", "minimum": 0},
            "failed": {"type": "integer", "minimum": 0},
            "pending": {"type": "integer", "minimum": 0},
            "deadlettered": {"type": "integer", "minimum": 0},
            "lastError": _OPTIONAL_TEXT,
            "lastErrorAt": _TIMESTAMP,
            "lastDeliveredAt": _TIMESTAMP,
            "circuit": _ref("Circuit"),
        },
        "additionalProperties": False,
    },
}

_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "Subscription id.",
}
_NOT_FOUND = {"404": _problem("No subscription with this id.")}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "string"}}}
_EVENT_BODY_TYPES = ("application/json", "application/cloudevents+json")


def _ce_header(name: str, description: str) -> dict[str, Any]:
    # Plain strings: in structured and batch mode the broker does not read ce- headers at all.
    return {
        "name": name,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": description,
    }


_EVENTS = {
    "post": {
        "operationId": "sendEvents",
        "summary": "Publish CloudEvents (binary, structured or batch content mode)",
        "description": (
            "Binary mode: the attributes in `ce-` headers (`ce-specversion`, `ce-id`, `ce-source`, "
            "`ce-type`, extensions alike), the payload as the body with its Content-Type. "
            "Structured mode: `application/cloudevents+json`, one event. Batch mode: "
            "`application/cloudevents-batch+json`, a JSON array, all or nothing. `202` is answered "
            "once every event is committed to disk."
        ),
        "parameters": [
            _ce_header("ce-specversion", "Binary mode: `1.0`; its presence selects binary mode."),
            _ce_header("ce-id", "Binary mode: the event id."),
            _ce_header("ce-source", "Binary mode: the event source."),
            _ce_header("ce-type", "Binary mode: the event type."),
            _ce_header("ce-subject", "Binary mode: the subject, if any."),
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/cloudevents+json": {"schema": _ref("CloudEvent")},
                "application/cloudevents-batch+json": {
                    "schema": {"type": "array", "items": _ref("CloudEvent")}
                },
                "application/json": {"schema": {}, "description": "Binary mode payload."},
                "application/octet-stream": {
                    "schema": {"type": "string", "format": "binary"},
                    "description": "Binary mode payload.",
                },
            },
        },
        "responses": {
            "202": _json("Every event of the request is on disk.", _ref("Accepted")),
            "400": _problem("An invalid event; every problem is listed with its pointer (`/1/time`)."),
            "413": _problem("The body, or one event of a batch, is over its limit."),
            "415": _problem("Neither a CloudEvents format nor binary mode."),
            "503": _problem("The durable backlog is over its bound; retry later.", _RETRY_AFTER),
        },
    }
}

_EVENT_BODY = {
    "required": True,
    "content": {media: {"schema": _ref("CloudEvent")} for media in _EVENT_BODY_TYPES},
}
_BODY_PROBLEMS = {
    "400": _problem("Malformed JSON or an invalid event or subscription; each problem names its field."),
    "413": _problem("The body is over its limit."),
    "415": _problem("The Content-Type is not JSON."),
}

PATHS: dict[str, Any] = {
    "/events": _EVENTS,
    "/subscriptions/{id}/status": {
        "parameters": [_ID],
        "get": {
            "operationId": "deliveryStatus",
            "summary": "Delivery counts and the last error of a subscription",
            "responses": {"200": _json("The counts.", _ref("DeliveryStatus")), **_NOT_FOUND},
        },
    },
    "/subscriptions/{id}/deadletters": {
        "parameters": [_ID],
        "get": {
            "operationId": "deadLetters",
            "summary": "A page of dead letters, oldest first",
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
                    "description": "Only dead letters with a greater id (`next` of the previous page).",
                    "schema": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1, "default": 0},
                },
            ],
            "responses": {
                "200": _json("The page.", _ref("DeadLetterPage")),
                "400": _problem("`limit` or `after` out of range."),
                **_NOT_FOUND,
            },
        },
    },
    "/subscriptions/{id}/deadletters/redrive": {
        "parameters": [_ID],
        "post": {
            "operationId": "redrive",
            "summary": "Deliver dead letters again (all, or the ids given)",
            "requestBody": {"required": False, "content": {"application/json": {"schema": _ref("Redrive")}}},
            "responses": {
                "202": _json("How many went back to delivery.", _ref("Redriven")),
                "400": _problem('The body is not `{"ids": [...]}`, or a query parameter was given.'),
                "413": _problem("The body is over 1 MiB."),
                **_NOT_FOUND,
            },
        },
    },
    "/subscriptions/{id}/replay": {
        "parameters": [_ID],
        "post": {
            "operationId": "replay",
            "summary": "Deliver archived events again (or count them: dryrun)",
            "description": (
                "The events accepted in `[from, to)` that the subscription matches, and `filter` "
                "too if given, go through the subscription's normal delivery path, each marked with "
                "the `replayid` extension attribute."
            ),
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("ReplayRequest")}},
            },
            "responses": {
                "200": _json("A dry run: how many events would be delivered.", _ref("ReplayCount")),
                "202": {
                    **_json("The replay started.", _ref("ReplayStarted")),
                    "headers": {
                        "Location": {
                            "description": "The replay: /subscriptions/{id}/replays/{replay}.",
                            "schema": {"type": "string"},
                        }
                    },
                },
                "429": {
                    **_problem(
                        "The subscription, or its tenant, has as many replays scanning the archive as"
                        " it may (--max-replays-per-subscription, --max-replays-per-tenant)."
                    ),
                    "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}},
                },
                **_BODY_PROBLEMS,
                **_NOT_FOUND,
            },
        },
    },
    "/subscriptions/{id}/replays": {
        "parameters": [_ID],
        "get": {
            "operationId": "replays",
            "summary": "The subscription's replays, oldest first",
            "responses": {
                "200": _json(
                    "The replays.",
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {"items": {"type": "array", "items": _ref("Replay")}},
                        "additionalProperties": False,
                    },
                ),
                **_NOT_FOUND,
            },
        },
    },
    "/subscriptions/{id}/replays/{replay}": {
        "parameters": [
            _ID,
            {
                "name": "replay",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
                "description": "Replay id.",
            },
        ],
        "get": {
            "operationId": "replayProgress",
            "summary": "A replay and its progress",
            "responses": {
                "200": _json("The replay.", _ref("Replay")),
                "404": _problem("No such subscription, or no such replay of it."),
            },
        },
        "delete": {
            "operationId": "cancelReplay",
            "summary": "Cancel a replay: it queues nothing more, its pending deliveries are removed",
            "responses": {
                "200": _json("The replay, as cancelled (a finished one is left as it is).", _ref("Replay")),
                "404": _problem("No such subscription, or no such replay of it."),
            },
        },
    },
    "/subscriptions/{id}/explain": {
        "parameters": [_ID],
        "post": {
            "operationId": "explainStored",
            "summary": "Which condition of the subscription accepts or refuses an event",
            "requestBody": _EVENT_BODY,
            "responses": {"200": _json("The verdict.", _ref("Explanation")), **_BODY_PROBLEMS, **_NOT_FOUND},
        },
    },
    "/explain": {
        "post": {
            "operationId": "explainDraft",
            "summary": "Explain an event against a subscription body that is not stored",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("DraftExplainRequest")}},
            },
            "responses": {"200": _json("The verdict.", _ref("Explanation")), **_BODY_PROBLEMS},
        },
    },
    "/subscriptions/{id}/tail": {
        "parameters": [_ID],
        "get": {
            "operationId": "tail",
            "summary": "The events the subscription matches from now on (Server-Sent Events)",
            "description": (
                '`event: ready` (`{"subscription": id}`: the watch is registered), then '
                "`event: cloudevent` per matched event (the event in the JSON format), "
                '`event: dropped` (`{"dropped": n}`) when the reader fell behind, and `: ping` '
                "comments while idle. Ends when the subscription is deleted or the broker stops. "
                "`x-events` gives the schema of each event's `data` by event name."
            ),
            "responses": {
                "200": {
                    "description": "The stream.",
                    "content": {
                        "text/event-stream": {
                            "schema": {"type": "string", "description": "Server-Sent Events."},
                            "x-events": {
                                "ready": _ref("TailReady"),
                                "cloudevent": _ref("CloudEvent"),
                                "dropped": _ref("TailDropped"),
                            },
                        }
                    },
                },
                **_NOT_FOUND,
            },
        },
    },
    "/status": {
        "get": {
            "operationId": "brokerStatus",
            "summary": "The broker at a glance: events, deliveries, backlog, dead letters",
            "responses": {
                "200": _json("Counters since the start, backlog and dead letters now.", _ref("BrokerStatus"))
            },
        }
    },
    "/status/subscriptions": {
        "get": {
            "operationId": "subscriptionsHealth",
            "summary": "Every subscription with its delivery health",
            "responses": {
                "200": _json(
                    "In creation order.",
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {"items": {"type": "array", "items": _ref("SubscriptionHealth")}},
                        "additionalProperties": False,
                    },
                )
            },
        }
    },
    "/metrics": {
        "get": {
            "operationId": "metrics",
            "summary": "Prometheus metrics (text exposition format)",
            "responses": {
                "200": {
                    "description": "The metrics.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    },
}
