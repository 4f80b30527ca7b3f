"""The catalog of broker events (docs/broker-events.md): the reserved type prefix, the tenant
extension attribute, and each type with a JSON Schema of its ``data``. The pipeline emits them;
the registry describes them as message definitions of the group :data:`GROUP`."""

from __future__ import annotations

from typing import Any

#: Types only the broker publishes begin with this.
RESERVED = "dev.cebroker."
#: Extension attribute naming the tenant a broker event concerns.
TENANT = "cebrokertenant"
#: The registry's message group of the broker's events.
GROUP = "dev.cebroker"

_SUBSCRIPTION = {"type": "string", "description": "the subscription's id"}
_SINK = {"type": ["string", "null"], "description": "the subscription's sink (credentials redacted)"}
_TIME = {"type": "string", "description": "RFC 3339"}


def _schema(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": sorted(required),
    }


_CIRCUIT = {"subscription": _SUBSCRIPTION, "sink": _SINK, "openedAt": _TIME}
_CHANGE = _schema(
    {
        "subscription": _SUBSCRIPTION,
        "revision": {"type": "integer"},
        "protocol": {"type": "string"},
        "sink": _SINK,
    }
)

#: Each type (without :data:`RESERVED`): what it says, and the JSON Schema of its data.
CATALOG: dict[str, tuple[str, dict[str, Any]]] = {
    "circuit.opened": (
        "A subscription's sink failed enough attempts in a row that its circuit opened",
        _schema({**_CIRCUIT, "error": {"type": "string"}}),
    ),
    "circuit.closed": (
        "A subscription's circuit closed again",
        _schema({**_CIRCUIT, "reason": {"type": "string"}}),
    ),
    "delivery.deadlettered": (
        "A delivery became a dead letter",
        _schema(
            {
                "subscription": _SUBSCRIPTION,
                "event": {
                    "type": "object",
                    "properties": {"id": {}, "source": {}, "type": {}},
                    "required": ["id", "source", "type"],
                },
                "attempts": {"type": "integer"},
                "reason": {"type": "string"},
                "status": {"type": ["string", "integer", "null"]},
            }
        ),
    ),
    "subscription.created": ("A subscription was created", _CHANGE),
    "subscription.updated": ("A subscription was replaced", _CHANGE),
    "subscription.deleted": ("A subscription was deleted", _CHANGE),
    "redrive.done": (
        "Dead letters of a subscription were put back into delivery",
        _schema(
            {"subscription": _SUBSCRIPTION, "redriven": {"type": "integer"}, "chosen": {"type": "boolean"}}
        ),
    ),
    "replay.started": (
        "A replay of archived events to a subscription was created",
        _schema({"subscription": _SUBSCRIPTION, "replay": {"type": "string"}, "events": {"type": "integer"}}),
    ),
    "replay.finished": (
        "A replay finished: every delivery it queued settled, or it was cancelled",
        _schema(
            {
                "subscription": _SUBSCRIPTION,
                "replay": {"type": "string"},
                "state": {"type": "string", "enum": ["done", "cancelled"]},
                "matched": {"type": "integer"},
                "delivered": {"type": "integer"},
                "deadlettered": {"type": "integer"},
                "removed": {"type": "integer"},
            }
        ),
    ),
    "source.quarantined": (
        "A protocol source set a message aside that it refused (concerns no tenant)",
        _schema(
            {
                "source": {"type": "string", "description": "the source's name"},
                "reason": {"type": "string"},
                "size": {"type": "integer", "description": "the message's size in bytes"},
                "time": _TIME,
            }
        ),
    ),
    "storage.unavailable": (
        "Writes to the broker's storage started failing (concerns no tenant)",
        _schema({"cause": {"type": "string"}}),
    ),
    "storage.available": ("Writes to the broker's storage succeed again (concerns no tenant)", _schema({})),
}


def message_definitions() -> dict[str, dict[str, Any]]:
    """The registry's message definitions of every broker event (ids: the full types)."""
    return {
        RESERVED + kind: {
            "description": description,
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {
                "type": {"value": RESERVED + kind},
                "datacontenttype": {"value": "application/json"},
            },
            "dataschemaformat": "JsonSchema/draft-07",
            "dataschema": schema,
        }
        for kind, (description, schema) in CATALOG.items()
    }
