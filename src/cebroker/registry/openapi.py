"""The registry's part of the broker's OpenAPI document, generated from the registry's own model
(:data:`~cebroker.registry.model.GROUP_TYPES`) and the methods each level allows
(:data:`~cebroker.registry.operations.ALLOWED`), so the two cannot drift apart.

Entities are described by their shape (JSON objects keyed by id, with the xRegistry common
attributes); the detailed rules of each entity are the registry's model (``GET /model``), which
the registry enforces on every write.
"""

from __future__ import annotations

from typing import Any

from cebroker.registry.model import GROUP_TYPES
from cebroker.registry.operations import ALLOWED

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/problem+json": {"schema": _ref("Problem")}}}


SCHEMAS: dict[str, Schema] = {
    "RegistryEntity": {
        "type": "object",
        "description": (
            "An xRegistry entity: the registry, a group, a resource, its meta or a version, with its "
            "attributes (`self`, `xid`, `epoch`, `createdat`, `modifiedat`, ...) and, when inlined, "
            "its collections. See `GET /model`."
        ),
    },
    "RegistryMap": {
        "type": "object",
        "description": "A collection: entities keyed by their ids.",
        "additionalProperties": _ref("RegistryEntity"),
    },
}

_LINK = {"Link": {"description": "`<base>/;rel=xregistry-root`.", "schema": {"type": "string"}}}
_ERRORS = {
    "400": _problem("The request breaks a rule of the registry; `errors` lists each problem."),
    "404": _problem("No such entity."),
    "405": _problem("This method is not supported here; `Allow` lists those that are."),
    "503": _problem("The database stayed busy; retry later."),
}
_ANY_JSON: dict[str, Any] = {"application/json": {"schema": {}}}
_DOCUMENT: dict[str, Any] = {
    "application/json": {"schema": {}},
    "*/*": {"schema": {}, "description": "A schema document, in its own media type."},
}
_READ_PARAMS = [
    {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "string"},
        "allowEmptyValue": True,
    }
    for name, description in (
        (
            "inline",
            "Collections (and `capabilities`, `modelsource` on the root) to include, e.g. `messages`, `*`.",
        ),
        ("filter", "Filter expressions: `attr`, `attr=value` (with `*`), `!=`, `<`, `>`; comma is AND."),
        ("doc", "Document view: `self` and inlined collections as relative references."),
        ("collections", "Only the child collections (on the root, `/export` and groups)."),
        ("sort", "On a collection: `<attr>[=asc|desc]`, the order of its entities."),
        (
            "limit",
            "On a collection: at most this many entities (`Link: <url>;rel=next;count=N`: the next page).",
        ),
        ("offset", "The server's cursor in the URL of a next page (follow the link rather than set it)."),
    )
]
_WRITE_PARAMS = [
    {
        "name": "check",
        "in": "query",
        "required": False,
        "description": "Dry run: every check of the write (formats, compatibility), nothing stored.",
        "schema": {"type": "string"},
        "allowEmptyValue": True,
    }
]


def _operation(method: str, level: str, path: str, document: bool) -> dict[str, Any]:
    what = path.rsplit("/", 1)[-1].strip("{}") or "registry"
    read = method == "GET"
    responses: dict[str, Any] = {}
    if read:
        document = level in ("resource", "version")
        responses["200"] = {
            "description": "The entity.",
            "headers": _LINK,
            "content": _DOCUMENT if document else _ANY_JSON,
        }
        if document:
            responses["303"] = {"description": "The document lives elsewhere: `Location`."}
    elif method == "DELETE":
        responses["204"] = {"description": "Deleted."}
    else:
        responses["200"] = {"description": "The entity as written.", "headers": _LINK, "content": _DOCUMENT}
        responses["201"] = {
            "description": "Created; `Location` names it.",
            "headers": {"Location": {"schema": {"type": "string"}}},
            "content": _DOCUMENT,
        }
        responses["204"] = {"description": "Written (a document resource, without a body)."}
        responses["409"] = _problem(
            "A schema version breaks its compatibility policy (`compatibility_violation`); `errors` "
            "names each breaking change, with its pointer in the new and in the earlier document."
        )
    operation: dict[str, Any] = {
        "operationId": f"registry{method.title()}{''.join(p.strip('{}').title() for p in path.split('/'))}",
        "summary": f"{method} {what}",
        "tags": ["registry"],
        "responses": {**responses, **_ERRORS},
    }
    if read:
        operation["parameters"] = _READ_PARAMS
    elif method != "DELETE":
        operation["parameters"] = _WRITE_PARAMS
        # A document resource takes its document as the body, whatever JSON it is.
        body = {} if document and level in ("resource", "version") else _ref("RegistryEntity")
        operation["requestBody"] = {
            "required": False,
            "content": {
                "application/json": {"schema": body},
                "*/*": {"schema": {}, "description": "A schema document (without `$details`)."},
            },
        }
    return operation


def _path(level: str, path: str, parameters: list[dict[str, Any]], document: bool = False) -> dict[str, Any]:
    item: dict[str, Any] = {
        method.lower(): _operation(method, level, path, document) for method in ALLOWED[level]
    }
    item["options"] = {
        "operationId": f"registryOptions{''.join(p.strip('{}').title() for p in path.split('/'))}",
        "summary": "Supported methods",
        "tags": ["registry"],
        "responses": {"204": {"description": "`Allow` lists the methods."}, **_ERRORS},
    }
    if parameters:
        item["parameters"] = parameters
    return item


def _read_only_options(name: str) -> dict[str, Any]:
    return {
        "operationId": f"registryOptions{name.title()}",
        "summary": "Supported methods (GET, HEAD, OPTIONS)",
        "tags": ["registry"],
        "responses": {"204": {"description": "`Allow` lists the methods."}, **_ERRORS},
    }


def _param(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._~:@-]+$"},
    }


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {"/": _path("registry", "/", [])}
    for name, summary in (
        ("model", "The registry's model"),
        ("modelsource", "The model source (`{}`)"),
        ("capabilities", "What this registry supports"),
        ("export", "The whole registry as one document (`?collections` for the maps only)"),
    ):
        paths[f"/{name}"] = {
            "get": {
                "operationId": f"registry{name.title()}",
                "summary": summary,
                "tags": ["registry"],
                "responses": {
                    "200": {"description": summary, "headers": _LINK, "content": _ANY_JSON},
                    **_ERRORS,
                },
            },
            "options": _read_only_options(name),
        }
    for name, plural, summary in (
        ("schema", "schemas", "A schema version by its URI, as the document (Schema Registry API)"),
        ("messagedefinition", "messages", "A message definition by its URI, its base messages merged in"),
    ):
        paths[f"/{name}"] = {
            "get": {
                "operationId": f"registryBy{name.title()}",
                "summary": summary,
                "tags": ["registry"],
                "parameters": [
                    {
                        "name": "uri",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    }
                ],
                "responses": {
                    "200": {"description": f"The {plural} entry.", "content": _DOCUMENT},
                    **_ERRORS,
                },
            },
            "options": _read_only_options(f"By{name.title()}"),
        }
    for plural, group in GROUP_TYPES.items():
        gid = _param(f"{group.singular}id")
        base = f"/{plural}"
        paths[base] = _path("groups", base, [])
        paths[f"{base}/{{{gid['name']}}}"] = _path("group", f"{base}/{{{gid['name']}}}", [gid])
        for resources, resource in group.resources.items():
            rid = _param(f"{resource.singular}id")
            collection = f"{base}/{{{gid['name']}}}/{resources}"
            item = f"{collection}/{{{rid['name']}}}"
            paths[collection] = _path("resources", collection, [gid])
            paths[item] = _path("resource", item, [gid, rid], resource.hasdocument)
            paths[f"{item}/meta"] = _path("meta", f"{item}/meta", [gid, rid])
            paths[f"{item}/versions"] = _path("versions", f"{item}/versions", [gid, rid])
            vid = _param("versionid")
            paths[f"{item}/versions/{{versionid}}"] = _path(
                "version", f"{item}/versions/{{versionid}}", [gid, rid, vid], resource.hasdocument
            )
    return paths


PATHS: dict[str, Any] = _paths()
