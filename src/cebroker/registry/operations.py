"""Which write each (method, target) pair performs, as functions to run in one transaction.

Every builder returns an operation ``(Writer) -> WriteResult`` naming the entities the
response shows; unsupported combinations raise ``action_not_supported`` with the methods that
are allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cebroker.registry.errors import XRegistryError
from cebroker.registry.paths import Target
from cebroker.registry.service import WriteResult
from cebroker.registry.versions import DocInput
from cebroker.registry.writes import Writer, as_map

Op = Callable[[Writer], WriteResult]

ALLOWED: dict[str, list[str]] = {
    "registry": ["GET", "PUT", "PATCH", "POST"],
    "groups": ["GET", "PATCH", "POST", "DELETE"],
    "group": ["GET", "PUT", "PATCH", "POST", "DELETE"],
    "resources": ["GET", "PATCH", "POST", "DELETE"],
    "resource": ["GET", "PUT", "PATCH", "POST", "DELETE"],
    "meta": ["GET", "PUT", "PATCH"],
    "versions": ["GET", "PATCH", "POST", "DELETE"],
    "version": ["GET", "PUT", "PATCH", "DELETE"],
}


def not_supported(method: str, target: Target) -> XRegistryError:
    """``action_not_supported`` with the ``Allow`` header for ``target``."""
    allow = ", ".join([*ALLOWED[target.level], "OPTIONS"])
    return XRegistryError("action_not_supported", target.xid, action=method, headers={"Allow": allow})


def write_op(
    method: str,
    target: Target,
    body: Any,
    *,
    doc: DocInput | None = None,
    setdefault: str | None = None,
    epoch: int | None = None,
) -> Op:
    """The operation for a write request; ``body`` is the parsed JSON (or header attributes)."""
    if method not in ALLOWED[target.level] or method == "GET":
        raise not_supported(method, target)
    # xRegistry-* headers next to a raw document update only the attributes they name
    patch = method == "PATCH" or doc is not None
    level = target.level
    if method == "DELETE":
        return _delete_op(target, body, epoch)
    if level == "registry":
        if method == "POST":
            return lambda w: WriteResult(200, [], w.changes, body_override=w.import_groups(_map(body, "/")))

        def put_registry(w: Writer) -> tuple[bool, str]:
            w.write_registry(_map(body, "/"), patch=patch)
            return False, "/"

        return _entity(put_registry)
    gtype = target.gtype
    assert gtype is not None
    if level == "groups":
        return lambda w: WriteResult(
            200,
            [f"/{gtype.plural}/{g}" for g in w.upsert_groups(gtype, _map(body, target.xid), patch=patch)],
            w.changes,
        )
    gid = target.gid
    assert gid is not None
    if level == "group":
        if method == "POST":
            return _group_post(target, _map(body, target.xid))

        def put_group(w: Writer) -> tuple[bool, str]:
            row, created = w.upsert_group(gtype, gid, _map(body, target.xid), patch=patch)
            return created, row.xid

        return _entity(put_group)
    rtype = target.rtype
    assert rtype is not None
    if level == "resources":
        return lambda w: WriteResult(
            200,
            [
                f"{target.xid}/{r}"
                for r in w.upsert_resources(gtype, gid, rtype, _map(body, target.xid), patch=patch)
            ],
            w.changes,
        )
    rid = target.rid
    assert rid is not None
    if level == "resource" and method == "POST":
        return _new_version(target, _map(body, target.xid), doc, setdefault)
    if level == "resource":

        def put_resource(w: Writer) -> tuple[bool, str]:
            row, created, _ = w.upsert_resource(
                gtype, gid, rtype, rid, _map(body, target.xid), patch=patch, doc=doc, setdefault=setdefault
            )
            return created, row.xid

        return _entity(put_resource)
    if level == "meta":

        def put_meta(w: Writer) -> tuple[bool, str]:
            res = w.rows.get(target.resource_xid)
            if res is None:
                raise XRegistryError("not_found", target.xid)
            w.write_meta(res, rtype, _map(body, target.xid), patch=patch)
            w.finalize(res, rtype)
            return False, target.xid

        return _entity(put_meta)
    if level == "versions":

        def post_versions(w: Writer) -> WriteResult:
            versions = _map(body, target.xid)
            if not versions:
                return WriteResult(200, [], w.changes)
            res, _, _ = w.upsert_resource(
                gtype, gid, rtype, rid, {"versions": versions}, patch=patch, setdefault=setdefault
            )
            return WriteResult(200, [f"{target.xid}/{v}" for v in versions], w.changes)

        return post_versions
    vid = target.vid
    assert vid is not None

    def put_version(w: Writer) -> tuple[bool, str]:
        vbody = _map(body, target.xid)
        res = w.rows.get(target.resource_xid)
        if res is None:
            w.upsert_resource(gtype, gid, rtype, rid, {**vbody, "versionid": vid}, patch=patch, doc=doc)
            return True, target.xid
        _, created = w.upsert_version(res, rtype, vid, vbody, patch=patch, doc=doc)
        if setdefault is not None:
            w.set_default(res, target.xid, setdefault)
        w.finalize(res, rtype)
        return created, target.xid

    return _entity(put_version)


def _map(body: Any, subject: str) -> dict[str, Any]:
    return as_map(body, subject, "the request body")


def _entity(fn: Callable[[Writer], tuple[bool, str] | Any]) -> Op:
    def op(w: Writer) -> WriteResult:
        created, xid = fn(w)
        return WriteResult(201 if created else 200, [xid], w.changes)

    return op


def _group_post(target: Target, body: Mapping[str, Any]) -> Op:
    gtype = target.gtype
    assert gtype is not None
    assert target.gid is not None
    gid = target.gid
    for key in body:
        if key not in gtype.resources:
            raise XRegistryError("resources_only", target.xid, name=key)

    def op(w: Writer) -> WriteResult:
        w.ensure_group(gtype, gid)
        out: dict[str, list[str]] = {}
        for plural, coll in body.items():
            out[plural] = w.upsert_resources(gtype, gid, gtype.resources[plural], coll, patch=False)
        return WriteResult(200, [], w.changes, body_override=out)

    return op


def _new_version(target: Target, body: Mapping[str, Any], doc: DocInput | None, setdefault: str | None) -> Op:
    gtype, rtype = target.gtype, target.rtype
    assert gtype is not None
    assert rtype is not None
    assert target.gid is not None
    assert target.rid is not None
    gid, rid = target.gid, target.rid

    def op(w: Writer) -> WriteResult:
        res = w.rows.get(target.xid)
        if res is None:  # the first version creates the resource
            _, _, written = w.upsert_resource(
                gtype, gid, rtype, rid, body, patch=False, doc=doc, setdefault=setdefault
            )
            assert written is not None
            return WriteResult(201, [written], w.changes, location=written)
        vid = body.get("versionid")
        if vid is None:
            vid = w.next_version_id(res)
        row, created = w.upsert_version(res, rtype, str(vid), body, patch=False, doc=doc)
        if setdefault is not None:
            w.set_default(res, row.xid, setdefault)
        w.finalize(res, rtype)
        return WriteResult(201 if created else 200, [row.xid], w.changes, location=row.xid)

    return op


def _delete_op(target: Target, body: Any, epoch: int | None) -> Op:
    level = target.level
    if level in ("groups", "resources", "versions"):
        entries = None if body is None else _map(body, target.xid)
        parent = target.xid.rsplit("/", 1)[0] or "/"

        def delete_many(w: Writer) -> WriteResult:
            w.delete_collection(parent, target.xid.rsplit("/", 1)[1], entries, target.rtype)
            return WriteResult(204, [], w.changes)

        return delete_many

    def delete_one(w: Writer) -> WriteResult:
        w.delete_entity(target.xid, epoch, target.rtype)
        return WriteResult(204, [], w.changes)

    return delete_one
