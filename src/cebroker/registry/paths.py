"""Registry URL paths: parsing a request path into a :class:`Target`, id rules, xid building."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from cebroker.registry.errors import XRegistryError
from cebroker.registry.model import GROUP_TYPES, GroupType, ResourceType, group_type

Level = Literal["registry", "groups", "group", "resources", "resource", "meta", "versions", "version"]

_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9\-._~:@]{0,127}$")
DETAILS = "$details"


def check_id(value: object, subject: str) -> str:
    """``value`` if it is a valid entity id, else ``malformed_id`` (spec: 1-128 chars of
    ``A-Za-z0-9-._~:@``, starting with a letter, digit or ``_``)."""
    if not isinstance(value, str) or not _ID.match(value):
        raise XRegistryError(
            "malformed_id",
            subject,
            id=value,
            error_detail="an id is 1-128 characters of A-Za-z0-9-._~:@ and starts with a letter, digit or _",
        )
    return value


@dataclass(frozen=True, slots=True)
class Target:
    """What a request path addresses."""

    level: Level
    gtype: GroupType | None = None
    gid: str | None = None
    rtype: ResourceType | None = None
    rid: str | None = None
    vid: str | None = None
    details: bool = False

    @property
    def xid(self) -> str:
        """The xid of the addressed entity or collection."""
        parts: list[str] = []
        if self.gtype:
            parts.append(self.gtype.plural)
        if self.gid is not None:
            parts.append(self.gid)
        if self.rtype:
            parts.append(self.rtype.plural)
        if self.rid is not None:
            parts.append(self.rid)
        if self.level == "meta":
            parts.append("meta")
        if self.level in ("versions", "version"):
            parts.append("versions")
        if self.vid is not None:
            parts.append(self.vid)
        return "/" + "/".join(parts)

    @property
    def group_xid(self) -> str:
        assert self.gtype is not None
        assert self.gid is not None
        return f"/{self.gtype.plural}/{self.gid}"

    @property
    def resource_xid(self) -> str:
        assert self.rtype is not None
        assert self.rid is not None
        return f"{self.group_xid}/{self.rtype.plural}/{self.rid}"


def parse_path(path: str) -> Target:
    """Parse ``path`` (already percent-decoded) into a :class:`Target`.

    Raises ``not_found`` for unknown group or resource types and ``malformed_id`` for bad ids;
    ``$details`` on anything but a resource or version is ``bad_details``.
    """
    subject = path if path.startswith("/") else "/" + path
    segs = [s for s in path.split("/") if s != ""]
    details = False
    if segs and segs[-1].endswith(DETAILS):
        segs[-1] = segs[-1][: -len(DETAILS)]
        details = True
        if not segs[-1]:
            raise XRegistryError("bad_details", subject)
    if not segs:
        if details:
            raise XRegistryError("bad_details", subject)
        return Target("registry")
    gtype = group_type(segs[0])
    if gtype is None:
        raise XRegistryError("not_found", subject)
    if len(segs) == 1:
        _no_details(details, subject)
        return Target("groups", gtype)
    gid = check_id(segs[1], subject)
    if len(segs) == 2:
        _no_details(details, subject)
        return Target("group", gtype, gid)
    rtype = gtype.resources.get(segs[2])
    if rtype is None:
        raise XRegistryError("not_found", subject)
    if len(segs) == 3:
        _no_details(details, subject)
        return Target("resources", gtype, gid, rtype)
    rid = check_id(segs[3], subject)
    if len(segs) == 4:
        return Target("resource", gtype, gid, rtype, rid, details=details)
    if segs[4] == "meta" and len(segs) == 5:
        _no_details(details, subject)
        return Target("meta", gtype, gid, rtype, rid)
    if segs[4] == "versions":
        if len(segs) == 5:
            _no_details(details, subject)
            return Target("versions", gtype, gid, rtype, rid)
        if len(segs) == 6:
            vid = check_id(segs[5], subject)
            return Target("version", gtype, gid, rtype, rid, vid, details=details)
    raise XRegistryError("not_found", subject)


def _no_details(details: bool, subject: str) -> None:
    if details:
        raise XRegistryError("bad_details", subject)


def _resource_paths(rtype: ResourceType, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    paths = {(*prefix, "meta"), (*prefix, "versions")}
    if rtype.hasdocument:
        paths |= {(*prefix, rtype.singular), (*prefix, "versions", rtype.singular)}
    return paths


def _group_paths(gtype: GroupType, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    paths: set[tuple[str, ...]] = set()
    for plural, rtype in gtype.resources.items():
        paths.add((*prefix, plural))
        paths |= _resource_paths(rtype, (*prefix, plural))
    return paths


def inlinable(target: Target) -> set[tuple[str, ...]]:
    """Every path ``?inline`` may name when reading ``target`` (relative to its entities)."""
    if target.level == "registry":
        paths: set[tuple[str, ...]] = {("capabilities",), ("model",), ("modelsource",)}
        for plural, gtype in GROUP_TYPES.items():
            paths.add((plural,))
            paths |= _group_paths(gtype, (plural,))
        return paths
    if target.level in ("groups", "group") and target.gtype is not None:
        return _group_paths(target.gtype, ())
    if target.level in ("resources", "resource") and target.rtype is not None:
        return _resource_paths(target.rtype, ())
    if target.level in ("versions", "version") and target.rtype is not None and target.rtype.hasdocument:
        return {(target.rtype.singular,)}
    return set()


def xid_to_target(xid: str) -> Target | None:
    """The target of a registry-relative xid, or None when it is not a valid entity path."""
    try:
        return parse_path(xid)
    except XRegistryError:
        return None
