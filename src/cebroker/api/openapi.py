"""The OpenAPI 3.1 document of the Subscriptions API, served at ``/openapi.json``.

Paths, parameters, headers and status codes are written out here by hand; the body schemas
live in :mod:`cebroker.api.openapi_schemas`. The settings other parts declare (each with its
``schema``, see :mod:`cebroker.subscription_rules`) are merged in from the same
:class:`~cebroker.api.admission.AdmissionRules` the validator uses, so the document keeps
describing what the validator accepts.
"""

from __future__ import annotations

import copy
from typing import Any

from cebroker import __version__
from cebroker.api.admission.tables import AdmissionRules
from cebroker.api.openapi_schemas import SCHEMAS, SETTINGS_SCHEMAS, Schema, ref
from cebroker.api.query import MAX_LIMIT

_BODY_TYPES = ("application/json", "application/cloudevents-subscription+json")


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/problem+json": {"schema": ref("Problem")}}}


def _header(description: str, schema: Schema | None = None) -> dict[str, Any]:
    return {"description": description, "schema": schema or {"type": "string"}}


_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "Subscription id.",
}
_IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": "`*` or a list of ETags: write only if the current ETag is listed (else 412).",
    "schema": {"type": "string"},
}
_ETAG = _header("Strong entity tag of this revision of the subscription.")
_ALLOW = {"Allow": _header("The methods this path supports.")}


def _filter_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "string", "minLength": 1},
    }


_LIST_PARAMS = [
    _filter_param("protocol", "Only subscriptions with this protocol."),
    _filter_param("source", "Only subscriptions with exactly this source."),
    _filter_param("type", "Only subscriptions whose types contain this value."),
    _filter_param("sink", "Only subscriptions with exactly this sink."),
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "Page size.",
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 100},
    },
    _filter_param("cursor", "Opaque cursor from a previous page's Link header."),
]

_BODY = {
    "required": True,
    "content": {media: {"schema": ref("SubscriptionRequest")} for media in _BODY_TYPES},
}
_BAD_BODY = {
    "400": _problem("Malformed JSON or an invalid subscription; every problem is listed in `errors`."),
    "413": _problem("The body is over the configured limit (64 KiB by default)."),
    "415": _problem("The Content-Type is not application/json or application/cloudevents-subscription+json."),
}
_UNAVAILABLE = {"503": _problem("The subscription store failed; nothing was written.")}
_NOT_FOUND = {"404": _problem("No subscription with this id.")}
_PRECONDITION = {
    "400": _problem("Malformed If-Match header."),
    "412": _problem("If-Match does not list the current ETag."),
}


def _one(description: str, status: str = "200", location: bool = False) -> dict[str, Any]:
    headers = {"ETag": _ETAG}
    if location:
        headers["Location"] = _header("Where the new subscription lives: /subscriptions/{id}.")
    return {
        status: {
            "description": description,
            "headers": headers,
            "content": {"application/json": {"schema": ref("Subscription")}},
        }
    }


_LIST_RESPONSE = {
    "description": "A page of subscriptions in creation order (an empty array when none match).",
    "headers": {"Link": _header('`<...cursor=...>; rel="next"` when another page follows.')},
    "content": {"application/json": {"schema": ref("SubscriptionList")}},
}
_OPTIONS = {"200": {"description": "The supported methods.", "headers": _ALLOW}}
_QUERY_BAD = {"400": _problem("An unknown, repeated or invalid query parameter, or a foreign cursor.")}

_PATHS: dict[str, Any] = {
    "/subscriptions": {
        "get": {
            "operationId": "querySubscriptions",
            "summary": "Query subscriptions",
            "parameters": _LIST_PARAMS,
            "responses": {"200": _LIST_RESPONSE, **_QUERY_BAD, **_UNAVAILABLE},
        },
        "head": {
            "operationId": "querySubscriptionsHead",
            "summary": "Headers of the query response",
            "parameters": _LIST_PARAMS,
            "responses": {"200": {"description": "As GET, without a body."}, **_QUERY_BAD, **_UNAVAILABLE},
        },
        "post": {
            "operationId": "createSubscription",
            "summary": "Create a subscription (the id is assigned by the broker)",
            "requestBody": _BODY,
            "responses": {
                **_one("The realized subscription.", "201", location=True),
                **_BAD_BODY,
                **_UNAVAILABLE,
            },
        },
        "options": {
            "operationId": "subscriptionsOptions",
            "summary": "Supported methods",
            "responses": _OPTIONS,
        },
    },
    "/subscriptions/{id}": {
        "parameters": [_ID],
        "get": {
            "operationId": "retrieveSubscription",
            "summary": "Retrieve a subscription",
            "responses": {**_one("The subscription."), **_NOT_FOUND, **_UNAVAILABLE},
        },
        "head": {
            "operationId": "retrieveSubscriptionHead",
            "summary": "Headers of the retrieve response",
            "responses": {
                "200": {"description": "As GET, without a body.", "headers": {"ETag": _ETAG}},
                **_NOT_FOUND,
                **_UNAVAILABLE,
            },
        },
        "put": {
            "operationId": "replaceSubscription",
            "summary": "Replace a subscription",
            "parameters": [_IF_MATCH],
            "requestBody": _BODY,
            "responses": {
                **_one("The realized subscription."),
                **_BAD_BODY,
                **_NOT_FOUND,
                **_PRECONDITION,
                **_UNAVAILABLE,
            },
        },
        "delete": {
            "operationId": "deleteSubscription",
            "summary": "Delete a subscription",
            "parameters": [_IF_MATCH],
            "responses": {
                **_one("The subscription as it was."),
                **_NOT_FOUND,
                **_PRECONDITION,
                **_UNAVAILABLE,
            },
        },
        "options": {
            "operationId": "subscriptionOptions",
            "summary": "Supported methods",
            "responses": _OPTIONS,
        },
    },
    "/openapi.json": {
        "get": {
            "operationId": "openapi",
            "summary": "This document",
            "responses": {
                "200": {
                    "description": "OpenAPI 3.1",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
        }
    },
}


def openapi_document(rules: AdmissionRules) -> dict[str, Any]:
    """The document, with the settings other parts declared in ``rules`` merged into their schemas."""
    schemas = copy.deepcopy(SCHEMAS)
    for protocol, schema_name in SETTINGS_SCHEMAS.items():
        properties = schemas[schema_name]["properties"]
        for name, extra in rules.protocols[protocol].schemas.items():
            properties[name] = copy.deepcopy(extra)  # the part that declared the setting owns its schema
    paths = copy.deepcopy(_PATHS)
    for path, operations in paths.items():
        for method, operation in operations.items():
            if isinstance(operation, dict) and "responses" in operation:
                operation["responses"].update(_access_responses(path, method))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cebroker Subscriptions API",
            "version": __version__,
            "description": "CloudEvents Subscriptions API: create, query, retrieve, replace, delete.",
        },
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": _SECURITY_SCHEMES},
        # Needed once the broker is configured with API keys or an OIDC issuer (docs/security.md);
        # a broker without (loopback only) takes calls without credentials.
        "security": [{"bearer": []}, {}],
    }


_SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key, or an access token of the configured OIDC issuer.",
    }
}
_UNAUTHORIZED = _problem("No credentials, or credentials not accepted (with WWW-Authenticate: Bearer).")
_FORBIDDEN = _problem("The credentials lack the scope this operation needs (named in `detail`).")
_QUOTA = _problem("The caller's tenant holds --max-subscriptions-per-tenant subscriptions already.")


def _access_responses(path: str, method: str) -> dict[str, Any]:
    """What an authenticated broker may answer besides the operation's own statuses."""
    extra: dict[str, Any] = {"401": _UNAUTHORIZED, "403": _FORBIDDEN}
    if path == "/subscriptions" and method == "post":
        extra["429"] = _QUOTA
    return extra
