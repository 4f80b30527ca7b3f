"""The registry's model: the CloudEvents registry (endpoints, message groups, schema groups).

The model is fixed: ``/model`` is read-only and ``/modelsource`` is ``{}``. Group and resource
types live in the explicit :data:`GROUP_TYPES` registry; :func:`model_document` renders the
``/model`` document from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SPEC_VERSION = "1.0-rc2"


@dataclass(frozen=True, slots=True)
class ResourceType:
    """A resource type within a group type."""

    plural: str
    singular: str
    maxversions: int  # 0 = unlimited
    hasdocument: bool
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def id_attr(self) -> str:
        """The name of the resource's id attribute (``messageid``, ``schemaid``)."""
        return self.singular + "id"


@dataclass(frozen=True, slots=True)
class GroupType:
    """A group type of the registry and the resource types it holds."""

    plural: str
    singular: str
    resources: dict[str, ResourceType]
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def id_attr(self) -> str:
        """The name of the group's id attribute (``messagegroupid``)."""
        return self.singular + "id"


def _attr(type_: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, **extra}


_MESSAGE_ATTRS: dict[str, dict[str, Any]] = {
    "basemessage": _attr("xid", target="/messagegroups/messages[/versions]"),
    "envelope": _attr("string"),
    "envelopemetadata": _attr("map", item=_attr("any")),
    "envelopeoptions": _attr("map", item=_attr("any")),
    "protocol": _attr("string"),
    "protocoloptions": _attr("object", attributes={"*": _attr("any")}),
    "dataschemaformat": _attr("string"),
    "dataschema": _attr("any"),
    "dataschemauri": _attr("uri"),
    "dataschemaxid": _attr("xid", target="/schemagroups/schemas[/versions]"),
    "datacontenttype": _attr("string"),
    "*": _attr("any"),
}

MESSAGES = ResourceType("messages", "message", maxversions=1, hasdocument=False, attributes=_MESSAGE_ATTRS)
SCHEMAS = ResourceType(
    "schemas",
    "schema",
    maxversions=0,
    hasdocument=True,
    attributes={"format": _attr("string", required=True), "*": _attr("any")},
)

GROUP_TYPES: dict[str, GroupType] = {
    "endpoints": GroupType(
        "endpoints",
        "endpoint",
        {"messages": MESSAGES},
        attributes={
            "usage": _attr("array", item=_attr("string"), required=True),
            "channel": _attr("string"),
            "envelope": _attr("string"),
            "envelopeoptions": _attr("map", item=_attr("any")),
            "protocol": _attr("string"),
            "protocoloptions": _attr("object", attributes={"*": _attr("any")}),
            "messagegroups": _attr("array", item=_attr("uri")),
            "*": _attr("any"),
        },
    ),
    "messagegroups": GroupType(
        "messagegroups",
        "messagegroup",
        {"messages": MESSAGES},
        attributes={"envelope": _attr("string"), "protocol": _attr("string"), "*": _attr("any")},
    ),
    "schemagroups": GroupType(
        "schemagroups",
        "schemagroup",
        {"schemas": SCHEMAS},
        attributes={"format": _attr("string"), "*": _attr("any")},
    ),
}

#: Attributes every entity has, in serialization order (besides its id and ``self``/``xid``).
COMMON_ATTRS: dict[str, dict[str, Any]] = {
    "epoch": _attr("uinteger", readonly=True, required=True),
    "name": _attr("string"),
    "description": _attr("string"),
    "documentation": _attr("url"),
    "icon": _attr("url"),
    "labels": _attr("map", item=_attr("string")),
    "createdat": _attr("timestamp", required=True),
    "modifiedat": _attr("timestamp", required=True),
}

_VERSION_ATTRS: dict[str, dict[str, Any]] = {
    "versionid": _attr("string", immutable=True, required=True),
    "isdefault": _attr("boolean", readonly=True, required=True),
    "ancestorid": _attr("string", required=True),
    "contenttype": _attr("string"),
}

_META_ATTRS: dict[str, dict[str, Any]] = {
    "readonly": _attr("boolean", readonly=True, required=True, default=False),
    "compatibility": _attr("string", enum=["none"], strict=False, default="none"),
    "deprecated": _attr("object", attributes={"*": _attr("any")}),
    "defaultversionid": _attr("string", required=True),
    "defaultversionurl": _attr("url", readonly=True, required=True),
    "defaultversionsticky": _attr("boolean", required=True, default=False),
}


def group_type(plural: str) -> GroupType | None:
    """The group type with this plural name, if the model has one."""
    return GROUP_TYPES.get(plural)


def _named(attrs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: {"name": name, **spec} for name, spec in attrs.items()}


def model_document() -> dict[str, Any]:
    """The full model as ``GET /model`` returns it."""
    registry_attrs = {
        "specversion": _attr("string", readonly=True, required=True),
        "registryid": _attr("string", readonly=True, immutable=True, required=True),
        "self": _attr("url", readonly=True, immutable=True, required=True),
        "xid": _attr("xid", readonly=True, immutable=True, required=True),
        **COMMON_ATTRS,
    }
    groups: dict[str, Any] = {}
    for gt in GROUP_TYPES.values():
        resources: dict[str, Any] = {}
        for rt in gt.resources.values():
            resources[rt.plural] = {
                "plural": rt.plural,
                "singular": rt.singular,
                "maxversions": rt.maxversions,
                "setversionid": True,
                "setdefaultversionsticky": True,
                "hasdocument": rt.hasdocument,
                "versionmode": "manual",
                "singleversionroot": False,
                "attributes": _named(
                    {rt.id_attr: _attr("string", immutable=True, required=True)}
                    | _VERSION_ATTRS
                    | COMMON_ATTRS
                    | rt.attributes
                ),
                "metaattributes": _named({rt.id_attr: _attr("string", required=True)} | _META_ATTRS),
            }
        groups[gt.plural] = {
            "plural": gt.plural,
            "singular": gt.singular,
            "attributes": _named(
                {gt.id_attr: _attr("string", immutable=True, required=True)} | COMMON_ATTRS | gt.attributes
            ),
            "resources": resources,
        }
    if "messages" in groups["endpoints"]["resources"]:
        groups["endpoints"]["ximportresources"] = ["/messagegroups/messages"]
    return {"attributes": _named(registry_attrs), "groups": groups}
