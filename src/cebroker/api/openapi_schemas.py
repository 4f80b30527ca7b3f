"""JSON Schemas (2020-12, as OpenAPI 3.1 uses) of the Subscriptions API bodies.

Hand-written to state what the broker accepts and returns; the API tests validate real
responses against them and fuzz the API from them.
"""

from __future__ import annotations

from typing import Any

from cebroker.subscription_settings.protocols import HTTP_METHODS, HttpSettings, PullSettings, default_of

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    """A reference to ``#/components/schemas/<name>``."""
    return {"$ref": f"#/components/schemas/{name}"}


_TEXT: Schema = {"type": "string", "minLength": 1}


def _pull(name: str) -> Any:
    """The default of a PULL setting (declared once, on the typed settings)."""
    return default_of(PullSettings, name)


_STRING_MAP: Schema = {
    "type": "object",
    "propertyNames": {"minLength": 1},
    "additionalProperties": {"type": "string"},
}
_ATTRIBUTES: Schema = {
    "type": "object",
    "description": "CloudEvents attribute name -> value to compare with (both non-empty).",
    "minProperties": 1,
    "propertyNames": {"pattern": "^[a-z0-9]+$"},
    "additionalProperties": _TEXT,
}


def _one_key(name: str, value: Schema, description: str) -> Schema:
    return {
        "type": "object",
        "description": description,
        "properties": {name: value},
        "required": [name],
        "additionalProperties": False,
    }


def _settings(properties: dict[str, Schema], required: list[str] | None = None) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


_MQTT: dict[str, Schema] = {
    "topicname": {"type": "string", "minLength": 1, "description": "Topic to publish to (no wildcards)."},
    "qos": {"type": "integer", "minimum": 0, "maximum": 2, "default": 1},
    "retain": {"type": "boolean", "default": False},
}

_ACCESS_VIEW: dict[str, Schema] = {
    "accesstokenexpiresutc": {"type": "string", "format": "date-time"},
    "accesstokentype": _TEXT,
}


def _credential(kind: str, visible: dict[str, Schema], secrets: list[str]) -> Schema:
    properties = {"credentialtype": {"const": kind}, **visible, **{s: _TEXT for s in secrets}}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _credential_view(kind: str, visible: dict[str, Schema]) -> Schema:
    properties = {"credentialtype": {"const": kind}, **visible}
    return {
        "type": "object",
        "description": "As stored (fields spelt as the client gave them), without the write-only secrets.",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_REFRESH_VIEW = {**_ACCESS_VIEW, "refreshtokenendpoint": {"type": "string", "format": "uri"}}
_REFRESH_ALIAS = {**_ACCESS_VIEW, "refreshtokenurl": {"type": "string", "format": "uri"}}

_COMMON_FIELDS: dict[str, Schema] = {
    "source": {"type": "string", "minLength": 1, "format": "uri-reference"},
    "types": {"type": "array", "minItems": 1, "items": _TEXT},
    "config": {
        "type": "object",
        "description": "Subscription-manager specific settings; keys are non-empty.",
        "propertyNames": {"minLength": 1},
    },
    "sink": {
        "type": "string",
        "format": "uri",
        "description": "Absolute URI; its scheme must fit the protocol.",
    },
    "protocol": ref("Protocol"),
}

#: Protocol -> the schema of its ``protocolsettings``.
SETTINGS_SCHEMAS = {
    "HTTP": "HTTPSettings",
    "MQTT3": "MQTT3Settings",
    "MQTT5": "MQTT5Settings",
    "AMQP": "AMQPSettings",
    "KAFKA": "KafkaSettings",
    "NATS": "NATSSettings",
    "PULL": "PULLSettings",
}
# In responses the protocol selects the settings schema exactly. (Requests use a plain anyOf:
# generators cannot build bodies from if/then.)
_PROTOCOL_SETTINGS_BY_PROTOCOL = [
    {
        "if": {"properties": {"protocol": {"const": name}}, "required": ["protocol"]},
        "then": {"properties": {"protocolsettings": ref(schema)}},
    }
    for name, schema in SETTINGS_SCHEMAS.items()
]

SCHEMAS: dict[str, Schema] = {
    "Protocol": {"type": "string", "enum": ["HTTP", "MQTT3", "MQTT5", "AMQP", "KAFKA", "NATS", "PULL"]},
    "SubscriptionRequest": {
        "type": "object",
        "description": "A proposed subscription. Unknown members are refused.",
        "properties": {
            "id": {
                "type": "string",
                "description": "Ignored on create; on replace it must equal the path id.",
            },
            **_COMMON_FIELDS,
            "filters": {"type": "array", "items": ref("Filter")},
            "filter": {**ref("Filter"), "description": "Alias of a one-element 'filters' (not with it)."},
            "protocolsettings": {
                "description": "The settings schema of the chosen protocol (HTTPSettings for HTTP, ...).",
                "anyOf": [ref(name) for name in SETTINGS_SCHEMAS.values()],
            },
            "sinkcredential": ref("SinkCredential"),
        },
        "required": ["protocol"],
        # The sink is required by every protocol but PULL, which forbids it (docs/pull.md).
        "if": {"properties": {"protocol": {"not": {"const": "PULL"}}}},
        "then": {"required": ["sink"]},
        "additionalProperties": False,
    },
    "Subscription": {
        "type": "object",
        "description": "A realized subscription: defaults applied, secrets left out.",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            **_COMMON_FIELDS,
            "filters": {"type": "array", "items": ref("Filter")},
            "protocolsettings": {"type": "object"},
            "sinkcredential": ref("SinkCredentialView"),
        },
        "required": ["id", "config", "filters", "protocol", "protocolsettings"],
        "additionalProperties": False,
        "allOf": _PROTOCOL_SETTINGS_BY_PROTOCOL,
    },
    "SubscriptionList": {"type": "array", "items": ref("Subscription")},
    "Filter": {
        "description": "One filter expression: an object with exactly one dialect.",
        "oneOf": [
            _one_key("exact", _ATTRIBUTES, "Every attribute equals its value."),
            _one_key("prefix", _ATTRIBUTES, "Every attribute starts with its value."),
            _one_key("suffix", _ATTRIBUTES, "Every attribute ends with its value."),
            _one_key("all", {"type": "array", "minItems": 1, "items": ref("Filter")}, "All match."),
            _one_key(
                "any", {"type": "array", "minItems": 1, "items": ref("Filter")}, "At least one matches."
            ),
            _one_key("not", ref("Filter"), "The nested filter does not match."),
            _one_key("sql", _TEXT, "A CloudEvents SQL v1 expression."),
            _one_key("cel", _TEXT, "A CEL expression (extension dialect)."),
        ],
    },
    "HTTPSettings": _settings(
        {
            "headers": {**_STRING_MAP, "description": "Extra request headers (not Content-*, Host or ce-*)."},
            "method": {"enum": list(HTTP_METHODS), "default": default_of(HttpSettings, "method")},
            "webhooksecret": {
                "type": "string",
                "description": (
                    "Standard Webhooks secret (whsec_ + base64 of 24-64 bytes) signing every delivery,"
                    " or 'generate'. Write-only: a generated secret is returned once, in the answer"
                    " to the create or replace that made it."
                ),
            },
        }
    ),
    "MQTT3Settings": _settings(dict(_MQTT), ["topicname"]),
    "MQTT5Settings": _settings(
        {
            **_MQTT,
            "expiry": {"type": "integer", "minimum": 0, "maximum": 4294967295},
            "userproperties": _STRING_MAP,
        },
        ["topicname"],
    ),
    "AMQPSettings": _settings(
        {
            "address": _TEXT,
            "linkname": _TEXT,
            "sendersettlementmode": {"enum": ["settled", "unsettled"], "default": "unsettled"},
            "linkproperties": _STRING_MAP,
        }
    ),
    "KafkaSettings": _settings(
        {
            "topicname": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,249}$"},
            "partitionkeyextractor": _TEXT,
            "clientid": _TEXT,
            "acks": {"enum": ["0", "1", "all", "-1", 0, 1, -1], "default": "all"},
        },
        ["topicname"],
    ),
    "NATSSettings": _settings(
        {"subject": {"type": "string", "pattern": r"^[^.\s*>]+(\.[^.\s*>]+)*$"}}, ["subject"]
    ),
    "PULLSettings": _settings(
        {
            "lockduration": {
                "type": "integer",
                "minimum": 1,
                "maximum": 300,
                "default": _pull("lockduration"),
            },
            "maxdeliverycount": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "default": _pull("maxdeliverycount"),
            },
            "releasedelay": {
                "type": "integer",
                "minimum": 0,
                "maximum": 3600,
                "default": _pull("releasedelay"),
            },
        },
        [],
    ),
    "SinkCredential": {
        "oneOf": [
            _credential("PLAIN", {"identifier": _TEXT}, ["secret"]),
            {
                **_credential("PLAIN", {"identity": _TEXT}, ["secret"]),
                "description": "'identity' is an alias of 'identifier' (stored and returned as given).",
            },
            _credential("ACCESSTOKEN", _ACCESS_VIEW, ["accesstoken"]),
            _credential("REFRESHTOKEN", _REFRESH_VIEW, ["accesstoken", "refreshtoken"]),
            {
                **_credential("REFRESHTOKEN", _REFRESH_ALIAS, ["accesstoken", "refreshtoken"]),
                "description": (
                    "'refreshtokenurl' is an alias of 'refreshtokenendpoint' (stored and returned as given)."
                ),
            },
        ]
    },
    "SinkCredentialView": {
        "oneOf": [
            _credential_view("PLAIN", {"identifier": _TEXT}),
            _credential_view("PLAIN", {"identity": _TEXT}),
            _credential_view("ACCESSTOKEN", _ACCESS_VIEW),
            _credential_view("REFRESHTOKEN", _REFRESH_VIEW),
            _credential_view("REFRESHTOKEN", _REFRESH_ALIAS),
        ]
    },
    "Problem": {
        "type": "object",
        "description": "RFC 9457 problem details.",
        "properties": {
            "type": {"type": "string", "format": "uri"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "errors": {
                "type": "array",
                "description": "One entry per problem: a body JSON Pointer, a query parameter or a header.",
                "items": {
                    "type": "object",
                    "properties": {
                        "pointer": {"type": "string"},
                        "parameter": {"type": "string"},
                        "header": {"type": "string"},
                        "detail": {"type": "string"},
                    },
                    "required": ["detail"],
                    "minProperties": 2,
                    "maxProperties": 2,
                },
            },
        },
        "required": ["type", "title", "status", "detail"],
    },
}
