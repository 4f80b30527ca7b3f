"""Where a JSON Schema in the registry may point: inside itself, or at this registry's schemas.

A ``$ref`` (also ``$dynamicRef``, ``$recursiveRef``) is resolved by the JSON Schema libraries
themselves, through a retrieval hook that serves only documents of this registry, addressed
by their URL (``<base>/schemagroups/g/schemas/s[/versions/v]``, or the same path relative to
the document). Nothing else is ever fetched or read: no other host, no ``file:`` URL.

* :func:`reference_problems` runs when a schema is stored, with the ``referencing`` library
  (the one behind ``jsonschema``): every reference that does not resolve that way is refused
  with a pointer to it, without quoting it.
* :func:`registry_retriever` is the ``retriever`` handed to ``jsonschema_rs`` when an event's
  data is checked, so that a schema stored before these rules existed cannot reach out either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import referencing.jsonschema as dialects
from cefilters.errors import pointer_token
from ceprotocols import jsontext
from referencing import Registry, Resource, Specification
from referencing.exceptions import (
    CannotDetermineSpecification,
    NoSuchResource,
    PointerToNowhere,
    Unresolvable,
)

from cebroker.registry.versions import is_json_type

#: Keywords whose value is a reference to resolve.
_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")

#: (The resolver type of ``referencing`` is not part of its public names: resolvers are typed
#: ``Any`` here.)

#: Finds a stored schema document by its xid (``/schemagroups/g/schemas/s[/versions/v]``):
#: the parsed JSON, or None when there is no JSON document there.
SchemaLookup = Callable[[str], Any]


def registry_path(uri: str, base: str) -> str | None:
    """The xid that ``uri`` (fragment ignored) names in the registry served at ``base``."""
    document = uri.split("#", 1)[0]
    if not document.startswith(base + "/"):
        return None
    path = document[len(base) :].rstrip("/")
    return path if path.startswith("/schemagroups/") else None


def registry_retriever(base: str, lookup: SchemaLookup) -> Callable[[str], Any]:
    """A ``retriever`` for jsonschema-rs that serves this registry's schemas and refuses the rest."""

    def retrieve(uri: str) -> Any:
        xid = registry_path(uri, base)
        document = lookup(xid) if xid is not None else None
        if document is None:
            raise ValueError("only references to this registry's JSON schemas are followed")
        return document

    return retrieve


def specification_of(schema: Any, *, draft7: bool) -> Specification[Any]:
    """The dialect of ``schema``: its ``$schema`` if it names one, else draft-07 when the
    definition says so, else 2020-12. Raises ``UnknownDialect`` for an unknown ``$schema``."""
    default = dialects.DRAFT7 if draft7 else dialects.DRAFT202012
    if isinstance(schema, dict) and "$schema" in schema:
        return dialects.specification_with(str(schema["$schema"]))
    return default


def reference_problems(
    schema: Any, uri: str, base: str, lookup: SchemaLookup, *, draft7: bool = False
) -> list[tuple[str, str]]:
    """``(pointer, reason)`` for each reference in ``schema`` that does not resolve inside the
    document or to one of this registry's schemas, and for a ``$schema`` naming no known dialect.

    ``uri`` is the schema's own URL in the registry: relative references resolve against it
    (or against a ``$id`` inside the document, as the JSON Schema specifications say).
    """
    if isinstance(schema, dict) and "$schema" in schema and not isinstance(schema["$schema"], str):
        return [("/$schema", "must be a string naming a JSON Schema dialect")]
    try:
        specification = specification_of(schema, draft7=draft7)
    except dialects.UnknownDialect:
        return [("/$schema", "names no JSON Schema dialect this registry knows")]
    checker = _Checker(base, lookup, specification)
    root = specification.create_resource(schema)
    checker.subresources = {id(resource.contents): resource for resource in _subresources(root)}
    # (attrs field aliases, which mypy does not see: hence the keyword mappings here and below)
    registry: Registry[Any] = Registry(**{"retrieve": checker.retrieve}).with_resource(uri, root)
    checker.walk(schema, "", registry.resolver(uri))
    return checker.problems


def _subresources(resource: Resource[Any]) -> Iterator[Resource[Any]]:
    yield resource
    for child in resource.subresources():
        yield from _subresources(child)


class _Checker:
    """Walks a schema, resolving each reference through a registry that retrieves only here."""

    def __init__(self, base: str, lookup: SchemaLookup, specification: Specification[Any]) -> None:
        self.base = base
        self.lookup = lookup
        self.specification = specification
        self.subresources: dict[int, Resource[Any]] = {}
        self.problems: list[tuple[str, str]] = []
        #: documents the last lookup tried to retrieve (None: a foreign one)
        self.retrieved: list[str | None] = []

    def retrieve(self, target: str) -> Resource[Any]:
        xid = registry_path(target, self.base)
        self.retrieved.append(xid)
        document = self.lookup(xid) if xid is not None else None
        if document is None:
            raise NoSuchResource(**{"ref": target})
        return Resource.from_contents(document, default_specification=self.specification)

    def walk(self, value: Any, pointer: str, resolver: Any) -> None:
        if isinstance(value, list):
            for index, item in enumerate(value):
                self.walk(item, f"{pointer}/{index}", resolver)
            return
        if not isinstance(value, dict):
            return
        resource = self.subresources.get(id(value))
        if resource is not None:  # a schema (not e.g. an enum value): it may move the base URI
            resolver = resolver.in_subresource(resource)
            for keyword in _REFERENCE_KEYWORDS:
                reference = value.get(keyword)
                if isinstance(reference, str):
                    reason = self.unresolved(resolver, reference)
                    if reason is not None:
                        self.problems.append((f"{pointer}/{pointer_token(keyword)}", reason))
        for key, item in value.items():
            self.walk(item, f"{pointer}/{pointer_token(key)}", resolver)

    def unresolved(self, resolver: Any, reference: str) -> str | None:
        """Why ``reference`` cannot be followed, or None when it resolves."""
        self.retrieved.clear()
        try:
            resolver.lookup(reference)
        except PointerToNowhere:
            return "points to nothing in the document it names"
        except (Unresolvable, CannotDetermineSpecification, dialects.UnknownDialect):
            if None in self.retrieved:
                return (
                    "points outside this registry; a reference may point only inside the document "
                    "or at this registry's schemas (by URL or path)"
                )
            if self.retrieved:
                return "names no JSON schema stored in this registry"
            return "cannot be resolved inside the document or this registry"
        return None


def is_json_schema_format(fmt: Any) -> bool:
    """Whether a ``format``/``dataschemaformat`` value names JSON Schema (absent: unknown)."""
    return isinstance(fmt, str) and fmt.lower().replace(" ", "").startswith("jsonschema")


def document_json(doc: bytes | None, contenttype: Any) -> Any:
    """A stored document parsed as JSON within the input limits, or None when it has no JSON
    media type or does not parse (such a document is never followed as a schema)."""
    if doc is None or (contenttype and not is_json_type(str(contenttype))):
        return None
    try:
        return jsontext.loads(doc)
    except jsontext.JsonTextError:
        return None
