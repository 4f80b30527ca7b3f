"""Write operations on the registry tree, run inside one store transaction per request.

:class:`Writer` applies PUT (replace), PATCH (merge) and POST (upsert each, new versions)
semantics to the registry, groups, resources, ``meta`` and versions; creates missing parents;
moves parents' epochs when children come and go; keeps the default version; and records every
change in a :class:`~cebroker.registry.changes.ChangeLog`. Version-level rules live in
:mod:`cebroker.registry.versions`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from cebroker.registry.changes import ChangeLog
from cebroker.registry.entities import (
    check_common,
    check_epoch,
    check_id_attr,
    computed_keys,
    merge_attrs,
    strip_computed,
)
from cebroker.registry.errors import XRegistryError
from cebroker.registry.meta import MetaWriter
from cebroker.registry.model import GROUP_TYPES, SPEC_VERSION, GroupType, ResourceType
from cebroker.registry.paths import check_id
from cebroker.registry.versions import DocInput
from cebroker.storage.registry import RegistryRows, Row

#: ``?ignore=`` values honoured on writes
IGNORABLE = frozenset({"epoch", "defaultversionid", "defaultversionsticky", "readonly", "id"})
_REGISTRY_KEYS = frozenset({"specversion", "registryid", "capabilities", "model", "modelsource"})


def as_map(value: object, subject: str, what: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``bad_request`` naming what was expected."""
    if not isinstance(value, dict):
        raise XRegistryError("bad_request", subject, error_detail=f"{what} must be a JSON object")
    return value


class Writer(MetaWriter):
    """Applies one request's writes; every method may raise :class:`XRegistryError`."""

    def __init__(self, rows: RegistryRows, now: str, ignore: frozenset[str] = frozenset()) -> None:
        super().__init__(rows, now, ChangeLog(now), ignore)

    # ---- registry -----------------------------------------------------------------------

    def registry_row(self) -> Row:
        """The registry root row, created on first use."""
        row = self.rows.get("/")
        if row is None:
            attrs = {"registryid": f"cebroker-{uuid.uuid4().hex[:12]}", "epoch": 1}
            attrs |= {"createdat": self.now, "modifiedat": self.now}
            row = self.rows.put(Row("/", "", "", "registry", "", attrs))
        return row

    def write_registry(self, body: Mapping[str, Any], *, patch: bool) -> None:
        """PUT or PATCH ``/``: the registry's own attributes and any group maps in the body."""
        reg = self.registry_row()
        if not self.ignores("epoch"):
            check_epoch(body, int(reg.attrs["epoch"]), "/")
        if body.get("specversion") not in (None, SPEC_VERSION):
            raise XRegistryError("unsupported_specversion", "/", specversion=body["specversion"])
        attrs_in = strip_computed(body, computed_keys(GROUP_TYPES), keep=[*_REGISTRY_KEYS, *GROUP_TYPES])
        attrs = merge_attrs(reg.attrs, attrs_in, patch=patch, now=self.now, preserve=["registryid"])
        attrs["registryid"] = reg.attrs["registryid"]
        check_common(attrs, "/")
        self._put_updated(reg, attrs)
        for plural, gtype in GROUP_TYPES.items():
            if plural in body:
                self.upsert_groups(gtype, body[plural], patch=patch)

    def import_groups(self, body: Mapping[str, Any]) -> dict[str, list[str]]:
        """``POST /``: upsert every group in the body's group maps; other keys are ``groups_only``."""
        for key in body:
            if key not in GROUP_TYPES:
                raise XRegistryError("groups_only", "/", name=key)
        return {
            plural: self.upsert_groups(GROUP_TYPES[plural], value, patch=False)
            for plural, value in body.items()
        }

    def upsert_groups(self, gtype: GroupType, coll: object, *, patch: bool) -> list[str]:
        """Upsert each group of a ``{gid: group}`` map; returns the ids processed."""
        groups = as_map(coll, f"/{gtype.plural}", gtype.plural)
        for gid, body in groups.items():
            self.upsert_group(gtype, gid, as_map(body, f"/{gtype.plural}/{gid}", gtype.singular), patch=patch)
        return list(groups)

    # ---- groups -------------------------------------------------------------------------

    def ensure_group(self, gtype: GroupType, gid: str) -> Row:
        """The group, created empty when missing (parents are created implicitly)."""
        row = self.rows.get(f"/{gtype.plural}/{gid}")
        return row if row is not None else self.upsert_group(gtype, gid, {}, patch=False)[0]

    def upsert_group(
        self, gtype: GroupType, gid: str, body: Mapping[str, Any], *, patch: bool
    ) -> tuple[Row, bool]:
        """PUT/PATCH one group (and any resource maps in its body); returns (row, created)."""
        xid = f"/{gtype.plural}/{check_id(gid, f'/{gtype.plural}/{gid}')}"
        if not self.ignores("id"):
            check_id_attr(body, gtype.id_attr, gid, gtype.singular, xid)
        attrs_in = strip_computed(
            body, computed_keys(gtype.resources), keep=[gtype.id_attr, *gtype.resources]
        )
        row = self.rows.get(xid)
        created = row is None
        if row is None:
            self.unique("/", gtype.plural, gid, xid)
            self.registry_row()
            attrs = merge_attrs({}, attrs_in, patch=False, now=self.now)
            check_common(attrs, xid)
            row = self.rows.put(Row(xid, "/", gtype.plural, "group", gid, attrs))
            self.bumped.add(xid)
            self.changes.record(xid, "group", "created")
            self.bump("/")
        else:
            if not self.ignores("epoch"):
                check_epoch(body, int(row.attrs["epoch"]), xid)
            attrs = merge_attrs(row.attrs, attrs_in, patch=patch, now=self.now)
            check_common(attrs, xid)
            self._put_updated(row, attrs)
        self.touched_groups.add(xid)
        for plural, rtype in gtype.resources.items():
            if plural in body:
                self.upsert_resources(gtype, gid, rtype, body[plural], patch=patch)
        return row, created

    # ---- resources ----------------------------------------------------------------------

    def upsert_resources(
        self, gtype: GroupType, gid: str, rtype: ResourceType, coll: object, *, patch: bool
    ) -> list[str]:
        """Upsert each resource of a ``{rid: resource}`` map; returns the ids processed."""
        subject = f"/{gtype.plural}/{gid}/{rtype.plural}"
        resources = as_map(coll, subject, rtype.plural)
        for rid, body in resources.items():
            self.upsert_resource(
                gtype, gid, rtype, rid, as_map(body, f"{subject}/{rid}", rtype.singular), patch=patch
            )
        return list(resources)

    def upsert_resource(
        self,
        gtype: GroupType,
        gid: str,
        rtype: ResourceType,
        rid: str,
        body: Mapping[str, Any],
        *,
        patch: bool,
        doc: DocInput | None = None,
        setdefault: str | None = None,
    ) -> tuple[Row, bool, str | None]:
        """PUT/PATCH one resource; returns (resource row, created, xid of the version written).

        The body holds the default version's attributes, optionally ``meta`` and ``versions``.
        When ``versions`` holds any version and no ``versionid`` names a target, the top-level
        version attributes are ignored (the spec: one of the listed versions is the default).
        """
        xid = f"/{gtype.plural}/{gid}/{rtype.plural}/{rid}"
        check_id(rid, xid)
        if not self.ignores("id"):
            check_id_attr(body, rtype.id_attr, rid, rtype.singular, xid)
        group = self.ensure_group(gtype, gid)
        res = self.rows.get(xid)
        created = res is None
        if res is None:
            self.unique(group.xid, rtype.plural, rid, xid)
            meta = {"epoch": 1, "createdat": self.now, "modifiedat": self.now, "defaultversionsticky": False}
            res = self.rows.put(Row(xid, group.xid, rtype.plural, "resource", rid, meta))
            self.bumped.add(xid)
            self.created.add(xid)
            self.changes.record(xid, "resource", "created")
            self.bump(group.xid)
        versions = body.get("versions")
        meta_in = body.get("meta")
        if isinstance(meta_in, dict) and isinstance(meta_in.get("xref"), str):
            versions = None  # an xref'd resource's listed versions are its target's
        if versions is not None:
            versions = as_map(versions, xid + "/versions", "versions")
            for each, vbody in versions.items():
                vmap = as_map(vbody, f"{xid}/versions/{each}", "version")
                self.upsert_version(res, rtype, each, vmap, patch=patch)
        meta_body = dict(as_map(body.get("meta", {}), xid + "/meta", "meta"))
        # the older shape puts meta attributes on the resource itself
        for key in ("defaultversionid", "defaultversionsticky"):
            if key in body and key not in meta_body:
                meta_body[key] = body[key]
        written: str | None = None
        vid = body.get("versionid")
        if isinstance(meta_body.get("xref"), str):
            pass  # the resource shows its target's versions: none of its own are written
        elif versions and vid is None:
            pass  # default-version attributes are ignored, see docstring
        else:
            vattrs = {
                k: v
                for k, v in body.items()
                if k not in ("meta", "versions", "defaultversionid", "defaultversionsticky")
            }
            if vid is None:
                current = self.default_version(res)
                vid = current.eid if current is not None else self.next_version_id(res)
            vrow, _ = self.upsert_version(res, rtype, str(vid), vattrs, patch=patch, doc=doc)
            written = vrow.xid
        if meta_body:
            self.write_meta(res, rtype, meta_body, patch=True)
        if setdefault is not None:
            self.set_default(res, written, setdefault)
        self.finalize(res, rtype)
        return res, created, written

    # ---- deletes ------------------------------------------------------------------------

    def delete_entity(self, xid: str, epoch: int | None, rtype: ResourceType | None = None) -> None:
        """Delete one group, resource or version (and everything below it)."""
        row = self.rows.get(xid)
        if row is None:
            raise XRegistryError("not_found", xid)
        if epoch is not None and not self.ignores("epoch") and int(row.attrs.get("epoch", 0)) != epoch:
            raise XRegistryError("mismatched_epoch", xid, bad_epoch=epoch, epoch=row.attrs.get("epoch"))
        self.rows.delete_subtree(xid)
        self.changes.record(xid, row.kind, "deleted")
        parent = self.rows.get(row.parent)
        if parent is None:
            return
        self.bump(parent.xid)
        if row.kind == "version" and rtype is not None:
            self.finalize(parent, rtype)

    def delete_collection(
        self, parent: str, coll: str, body: Mapping[str, Any] | None, rtype: ResourceType | None = None
    ) -> None:
        """``DELETE`` of a collection: everything, or the ids in ``body`` (unknown ids ignored).

        Each entry may carry an epoch to check: ``{"epoch": n}``, or for resources
        ``{"meta": {"epoch": n}}`` (a top-level epoch on a resource is ``misplaced_epoch``).
        """
        if body is None:
            for row in self.rows.children(parent, coll):
                self.delete_entity(row.xid, None, rtype)
            return
        is_resources = coll not in GROUP_TYPES and coll != "versions"
        for eid, entry in body.items():
            entry = as_map(entry, f"{parent.rstrip('/')}/{coll}/{eid}", "entry")
            xid = f"{parent.rstrip('/')}/{coll}/{eid}"
            if self.rows.get(xid) is None:
                continue
            if is_resources:
                if "epoch" in entry:
                    raise XRegistryError("misplaced_epoch", xid)
                epoch = as_map(entry.get("meta", {}), xid + "/meta", "meta").get("epoch")
            else:
                epoch = entry.get("epoch")
            if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
                raise XRegistryError(
                    "invalid_attribute", xid, name="epoch", error_detail="must be an integer"
                )
            self.delete_entity(xid, epoch, rtype)
