"""A resource's ``meta`` and its default version (the middle layer of a write).

The default version is the newest (creation order) unless ``meta.defaultversionsticky`` pins
``meta.defaultversionid``; setting ``defaultversionid`` makes it sticky and ``null`` un-sticks
it; a pinned version that is deleted gives the default back to the newest. ``maxversions``
prunes the oldest versions that are not the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cebroker.registry.entities import check_common, check_epoch, computed_keys, merge_attrs, strip_computed
from cebroker.registry.errors import XRegistryError
from cebroker.registry.formats.compatibility import POLICIES
from cebroker.registry.model import ResourceType
from cebroker.registry.paths import xid_to_target
from cebroker.registry.schemachecks import policy_problem
from cebroker.registry.versions import VersionWriter
from cebroker.storage.registry import Row


class MetaWriter(VersionWriter):
    """Writes of ``meta`` and the rules of the default version."""

    def write_meta(self, res: Row, rtype: ResourceType, body: Mapping[str, Any], *, patch: bool) -> None:
        """PUT/PATCH a resource's ``meta``: default version choice, stickiness, other attributes."""
        subject = res.xid + "/meta"
        self.refresh(res)
        if not self.ignores("epoch") and res.xid not in self.created:
            check_epoch(body, int(res.attrs["epoch"]), subject)
        incoming = strip_computed(body, computed_keys(()), keep=[rtype.id_attr, "readonly"])
        if self.ignores("defaultversionid"):
            incoming.pop("defaultversionid", None)
        if self.ignores("defaultversionsticky"):
            incoming.pop("defaultversionsticky", None)
        sticky = incoming.pop("defaultversionsticky", None if patch else False)
        if sticky is not None and not isinstance(sticky, bool):
            raise XRegistryError(
                "invalid_attribute", subject, name="defaultversionsticky", error_detail="boolean"
            )
        has_vid = "defaultversionid" in incoming
        vid = incoming.pop("defaultversionid", None)
        if vid is not None and not isinstance(vid, str):
            raise XRegistryError("invalid_attribute", subject, name="defaultversionid", error_detail="string")
        attrs = merge_attrs(res.attrs, incoming, patch=True, now=self.now)
        if not patch:
            for key in list(attrs):
                if key not in incoming and key not in (
                    "epoch",
                    "createdat",
                    "modifiedat",
                    "defaultversionid",
                ):
                    attrs.pop(key)
        if has_vid and vid is None:
            sticky = False if sticky is None else sticky
        elif vid is not None and sticky is not False:
            sticky = True
            attrs["defaultversionid"] = vid
            self._explicit_default.add(res.xid)
        if sticky is not None:
            attrs["defaultversionsticky"] = sticky
        self._write_xref(res, rtype, attrs, subject)
        if policy_problem(attrs, subject) is not None:
            raise XRegistryError(
                "invalid_attribute",
                subject,
                name="compatibility",
                error_detail=f"one of {', '.join(POLICIES)}",
            )
        check_common(attrs, subject)
        self._put_updated(res, attrs)

    def _write_xref(self, res: Row, rtype: ResourceType, attrs: dict[str, Any], subject: str) -> None:
        """``meta.xref``: the xid of another resource of the same type, whose versions this one
        shows instead of its own (which are deleted); removing it gives the resource a new
        version ``1`` (a resource without an xref has at least one version)."""
        xref = attrs.get("xref")
        before = res.attrs.get("xref")
        if xref is None:
            attrs.pop("xref", None)
            if isinstance(before, str) and not self.versions_of(res):
                res.attrs = attrs
                self.upsert_version(res, rtype, "1", {}, patch=False)
                attrs = res.attrs
            return
        target = xid_to_target(xref) if isinstance(xref, str) else None
        if target is None or target.level != "resource" or target.rtype is not rtype:
            raise XRegistryError(
                "invalid_attribute", subject, name="xref", error_detail=f"the xid of another {rtype.singular}"
            )
        if xref == res.xid:
            raise XRegistryError("invalid_attribute", subject, name="xref", error_detail="it names itself")
        if self.rows.get(xref) is None:
            raise XRegistryError("unknown_id", subject, singular=rtype.singular, id=xref)
        for version in self.versions_of(res):
            self.rows.delete_subtree(version.xid)
            self.changes.record(version.xid, "version", "deleted")
        for key in ("defaultversionid", "defaultversionsticky"):
            attrs.pop(key, None)

    def set_default(self, res: Row, written: str | None, value: str) -> None:
        """``?setdefaultversionid=<vid>|request|null``."""
        self.refresh(res)
        if value == "null":
            res.attrs["defaultversionsticky"] = False
        elif value == "request":
            if written is None:
                raise XRegistryError("bad_flag", res.xid, flag="setdefaultversionid=request")
            res.attrs["defaultversionid"] = written.rsplit("/", 1)[1]
            res.attrs["defaultversionsticky"] = True
            self._explicit_default.add(res.xid)
        else:
            res.attrs["defaultversionid"] = value
            res.attrs["defaultversionsticky"] = True
            self._explicit_default.add(res.xid)
        self.rows.put(res)

    def finalize(self, res: Row, rtype: ResourceType) -> None:
        """After a resource's writes: prune to ``maxversions``, settle the default version."""
        self.refresh(res)
        if isinstance(res.attrs.get("xref"), str):
            self.touched_resources.add(res.xid)  # no versions of its own: its target's
            return
        versions = self.versions_of(res)
        if not versions:
            self.changes.record(res.xid, "resource", "deleted")
            self.rows.delete_subtree(res.xid)
            self.bump(res.parent)
            return
        sticky = bool(res.attrs.get("defaultversionsticky"))
        ids = {v.eid for v in versions}
        if sticky and res.attrs.get("defaultversionid") not in ids:
            if res.xid in self._explicit_default:
                raise XRegistryError(
                    "unknown_id", res.xid + "/meta", singular="version", id=res.attrs.get("defaultversionid")
                )
            sticky = False  # the pinned version went away: back to "newest"
            res.attrs["defaultversionsticky"] = False
        default = res.attrs["defaultversionid"] if sticky else versions[-1].eid
        while rtype.maxversions and len(versions) > rtype.maxversions:
            victim = next((v for v in versions if v.eid != default), None)
            if victim is None:
                raise XRegistryError("too_many_versions", res.xid, limit=rtype.maxversions)
            self.rows.delete_subtree(victim.xid)
            self.changes.record(victim.xid, "version", "deleted")
            versions.remove(victim)
        res.attrs["defaultversionid"] = default
        self.rows.put(res)
        self.touched_resources.add(res.xid)
