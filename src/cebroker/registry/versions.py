"""Versions and their documents (the lowest layer of a write).

Rules kept here: new version ids are ``1``, ``2``, ... per resource; a new version's
``ancestorid`` is the newest existing version (a root version points at itself); a document
arrives as raw bytes, or inline in JSON as ``<singular>`` (a JSON value, or a string for
non-JSON media types) or ``<singular>base64``. Epoch bookkeeping shared by every layer lives
here too: an entity's epoch moves at most once per request.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cebroker.registry.changes import ChangeLog
from cebroker.registry.compat import upgrade_message
from cebroker.registry.entities import (
    changed_names,
    check_common,
    check_epoch,
    check_id_attr,
    computed_keys,
    merge_attrs,
    strip_computed,
)
from cebroker.registry.errors import XRegistryError
from cebroker.registry.model import MESSAGES, ResourceType
from cebroker.registry.paths import check_id
from cebroker.storage.registry import RegistryRows, Row

JSON_TYPES = ("application/json", "text/json")
#: attributes the server computes on a schema version from its checks (ignored on input)
VALIDATION_ATTRS = (
    "formatvalidated",
    "formatvalidatedreason",
    "compatibilityvalidated",
    "compatibilityvalidatedreason",
)


def is_json_type(contenttype: str | None) -> bool:
    """True for JSON media types (``application/json``, ``application/*+json``)."""
    if not contenttype:
        return False
    base = contenttype.split(";")[0].strip().lower()
    return base in JSON_TYPES or base.endswith("+json")


@dataclass(frozen=True, slots=True)
class DocInput:
    """A resource document given in a request: raw bytes and their media type."""

    data: bytes
    contenttype: str | None


class VersionWriter:
    """Version-level writes; :class:`cebroker.registry.writes.Writer` builds on it."""

    def __init__(self, rows: RegistryRows, now: str, changes: ChangeLog, ignore: frozenset[str]) -> None:
        self.rows = rows
        self.now = now
        self.changes = changes
        self.ignore = ignore
        #: entities whose epoch already moved in this request (it moves at most once)
        self.bumped: set[str] = set()
        #: groups written in this request (for document checks)
        self.touched_groups: set[str] = set()
        #: resources written in this request
        self.touched_resources: set[str] = set()
        #: versions written in this request (their documents are checked before the commit)
        self.touched_versions: set[str] = set()
        #: resources created by this request (an epoch given for them is not checked)
        self.created: set[str] = set()
        #: resources whose default version was set explicitly in this request
        self._explicit_default: set[str] = set()

    def ignores(self, what: str) -> bool:
        """True when ``?ignore`` named ``what``."""
        return what in self.ignore

    def unique(self, parent: str, coll: str, eid: str, subject: str) -> None:
        """Ids are unique case-insensitively within their collection."""
        other = self.rows.sibling(parent, coll, eid)
        if other is not None and other.eid != eid:
            raise XRegistryError(
                "bad_request",
                subject,
                error_detail=f"an entity with id {other.eid!r} exists (ids ignore case)",
            )

    def bump(self, xid: str) -> None:
        """Move an entity's epoch (once per request) because its children changed."""
        if xid in self.bumped:
            return
        row = self.rows.get(xid)
        if row is None:
            return
        row.attrs["epoch"] = int(row.attrs.get("epoch", 0)) + 1
        row.attrs["modifiedat"] = self.now
        self.rows.put(row)
        self.bumped.add(xid)

    def refresh(self, row: Row) -> Row:
        """Reload ``row``'s attributes in place (a parent's epoch may have moved meanwhile)."""
        fresh = self.rows.get(row.xid)
        if fresh is not None:
            row.attrs, row.doc = fresh.attrs, fresh.doc
        return row

    def _put_updated(self, row: Row, attrs: dict[str, Any]) -> None:
        changed = changed_names(row.attrs, attrs)
        if row.xid in self.bumped:  # epoch already moved in this request
            attrs["epoch"] = row.attrs["epoch"]
        row.attrs = attrs
        self.rows.put(row)
        self.bumped.add(row.xid)
        self.changes.record(row.xid, row.kind, "updated", changed)

    # ---- versions -----------------------------------------------------------------------

    def versions_of(self, res: Row) -> list[Row]:
        """The resource's versions, oldest first."""
        return self.rows.children(res.xid, "versions")

    def default_version(self, res: Row) -> Row | None:
        """The current default version."""
        vid = res.attrs.get("defaultversionid")
        if vid is not None:
            row = self.rows.get(f"{res.xid}/versions/{vid}")
            if row is not None:
                return row
        versions = self.versions_of(res)
        return versions[-1] if versions else None

    def next_version_id(self, res: Row) -> str:
        """The first of ``1``, ``2``, ... not yet used by the resource."""
        taken = {v.eid.lower() for v in self.versions_of(res)}
        n = len(taken) + 1
        while str(n) in taken:
            n += 1
        return str(n)

    def upsert_version(
        self,
        res: Row,
        rtype: ResourceType,
        vid: str,
        body: Mapping[str, Any],
        *,
        patch: bool,
        doc: DocInput | None = None,
    ) -> tuple[Row, bool]:
        """PUT/PATCH one version of ``res``; returns (row, created)."""
        xid = f"{res.xid}/versions/{check_id(vid, f'{res.xid}/versions/{vid}')}"
        if isinstance(res.attrs.get("xref"), str):
            raise XRegistryError(
                "bad_request",
                xid,
                error_detail=f"{res.xid} has an xref: its versions are those of {res.attrs['xref']}",
            )
        if not self.ignores("id"):
            check_id_attr(body, "versionid", vid, "version", xid)
            check_id_attr(body, rtype.id_attr, res.eid, rtype.singular, xid)
        # (the outcome of the document checks is the server's: computed again on every write)
        attrs_in = strip_computed(
            body, computed_keys(()), keep=[rtype.id_attr, "versionid", *VALIDATION_ATTRS]
        )
        if rtype is MESSAGES:
            attrs_in = upgrade_message(attrs_in, xid)
        doc = self._doc_from_json(rtype, attrs_in, xid) or doc
        old = self.rows.get(xid)
        created = old is None
        if old is None:
            self.unique(res.xid, "versions", vid, xid)
            versions = self.versions_of(res)
            attrs = merge_attrs({}, attrs_in, patch=False, now=self.now)
            attrs["ancestorid"] = attrs_in.get("ancestorid") or (versions[-1].eid if versions else vid)
            row = Row(xid, res.xid, "versions", "version", vid, attrs)
            self.changes.record(xid, "version", "created")
            self.bump(res.xid)
        else:
            if not self.ignores("epoch"):
                check_epoch(body, int(old.attrs["epoch"]), xid)
            attrs = merge_attrs(
                old.attrs, attrs_in, patch=patch, now=self.now, preserve=["ancestorid", "contenttype"]
            )
            if old.xid in self.bumped:
                attrs["epoch"] = old.attrs["epoch"]
            self.changes.record(xid, "version", "updated", changed_names(old.attrs, attrs))
            row = old
            row.attrs = attrs
        if doc is not None:
            row.doc = doc.data
            row.attrs.pop(rtype.singular + "url", None)
            if doc.contenttype:
                row.attrs["contenttype"] = doc.contenttype
            elif not doc.data:
                # No bytes: the type the previous document had no longer describes anything (an
                # empty body served as JSON is not JSON).
                row.attrs.pop("contenttype", None)
        elif rtype.singular + "url" in row.attrs:
            row.doc = None
        check_common(row.attrs, xid)
        self.rows.put(row)
        self.bumped.add(xid)
        self.touched_resources.add(res.xid)
        self.touched_versions.add(xid)
        return row, created

    def _doc_from_json(self, rtype: ResourceType, attrs: dict[str, Any], subject: str) -> DocInput | None:
        """Take an inlined document (``<singular>`` or ``<singular>base64``) out of ``attrs``."""
        if not rtype.hasdocument:
            return None
        key, key64 = rtype.singular, rtype.singular + "base64"
        if key in attrs and key64 in attrs:
            raise XRegistryError(
                "invalid_attribute", subject, name=key, error_detail=f"{key} and {key64} together"
            )
        if key64 in attrs:
            try:
                data = base64.b64decode(str(attrs.pop(key64)), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise XRegistryError("invalid_attribute", subject, name=key64, error_detail=str(exc)) from exc
            return DocInput(data, attrs.get("contenttype"))
        if key not in attrs:
            return None
        value = attrs.pop(key)
        if isinstance(value, str) and not is_json_type(attrs.get("contenttype")):
            return DocInput(value.encode("utf-8"), attrs.get("contenttype"))
        return DocInput(
            json.dumps(value, ensure_ascii=False).encode("utf-8"),
            attrs.get("contenttype") or "application/json",
        )
