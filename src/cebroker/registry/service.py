"""The registry's operations, independent of HTTP: reads and atomic writes over stored rows.

:class:`RegistryCore` is synchronous: each call takes the rows of one storage transaction (see
:class:`~cebroker.storage.registry.RegistryStore`), and the async
:class:`~cebroker.registry.component.RegistryComponent` hands every call to the storage. A write
runs in one transaction: apply, re-advertise the broker's endpoints, check every touched
definition, and commit, or roll back on the first error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ceprotocols import jsontext

from cebroker.errors import FieldProblem
from cebroker.registry import schemarefs
from cebroker.registry.basemessage import resolve
from cebroker.registry.capabilities import capabilities_document
from cebroker.registry.changes import ChangeLog
from cebroker.registry.documents import (
    DocumentSchema,
    check_endpoint,
    check_group,
    check_message,
    check_schema_version,
)
from cebroker.registry.entities import now_rfc3339
from cebroker.registry.errors import XRegistryError
from cebroker.registry.model import GROUP_TYPES, MESSAGES, SCHEMAS, model_document
from cebroker.registry.paths import Target, parse_path
from cebroker.registry.query import Branch, Inline
from cebroker.registry.schemachecks import SchemaChecks, policy_problem
from cebroker.registry.versions import is_json_type
from cebroker.registry.views import Node, NodeKind, Tree, View
from cebroker.registry.writes import Writer
from cebroker.storage.registry import EntityClash, RegistryReader, RegistryRows, Row


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Flags of a read."""

    inline: Inline = field(default_factory=lambda: Inline([]))
    doc: bool = False
    branches: list[Branch] = field(default_factory=lambda: [()])
    #: the registry's groups rendered only when the answer is written (see views.Deferred)
    defer: bool = False


@dataclass(frozen=True, slots=True)
class RawDocument:
    """A resource or version document as raw bytes, with its attributes for headers."""

    data: bytes | None
    attrs: dict[str, Any]
    location: str | None  # external document URL (303), when there are no bytes
    content_location: str


@dataclass(slots=True)
class WriteResult:
    """What a write did: the entity xids to render, whether it created, and its changes."""

    status: int
    xids: list[str]
    changes: ChangeLog
    location: str | None = None
    body_override: Any = None


class DryRun(Exception):
    """A write that passed every check under ``?check``: raised to roll its transaction back,
    carrying what the answer shows (the status the write would have had, and the written
    entity rendered inside the transaction)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__("dry run")
        self.status = status
        self.body = body


#: A hook run inside each write transaction after the request's own writes.
WriteHook = Callable[[Writer], None]


_NODE_KINDS: dict[str, NodeKind] = {
    "group": "group",
    "resource": "resource",
    "meta": "meta",
    "version": "version",
}


def _draft7(fmt: Any) -> bool:
    return "draft-07" in str(fmt or "").lower()


class RegistryCore:
    """Reads and writes over the rows of one storage transaction; holds no state of its own
    beyond its configuration, so reads and writes may run on different threads."""

    def __init__(
        self, base_url: str, document_schema: DocumentSchema | None = None, checks: SchemaChecks | None = None
    ) -> None:
        self.base = base_url.rstrip("/")
        self.document_schema = document_schema
        self.hooks: list[WriteHook] = []
        self.checks = checks or SchemaChecks()

    # ---- writes -------------------------------------------------------------------------

    def write(
        self,
        rows: RegistryRows,
        op: Callable[[Writer], Any],
        ignore: frozenset[str] = frozenset(),
        *,
        dry_run: bool = False,
    ) -> WriteResult:
        """Run ``op`` with the hooks and checks over the rows of one write transaction (which
        the caller rolls back if this raises); returns what ``op`` returned (when it is a
        :class:`WriteResult`) with the request's changes. ``lambda w: None`` creates the root
        and runs the hooks (e.g. the broker's endpoints). With ``dry_run`` a write that passes
        every check raises :class:`DryRun` instead of returning, so that nothing is kept."""
        now = now_rfc3339()
        writer = Writer(rows, now, ignore)
        try:
            writer.registry_row()
            result = op(writer)
            for hook in self.hooks:
                hook(writer)
        except EntityClash as exc:
            raise XRegistryError("bad_request", exc.xid, error_detail=f"id clash: {exc}") from exc
        self._check(writer)
        if not isinstance(result, WriteResult):
            result = WriteResult(200, [], writer.changes)
        result.changes = writer.changes
        if dry_run:
            raise DryRun(result.status, self._dry_run_body(rows, result))
        return result

    def _dry_run_body(self, rows: RegistryRows, result: WriteResult) -> Any:
        """The metadata of the entities the write would have left (``$details`` form)."""
        shown = {}
        for xid in result.xids:
            target = parse_path(xid)
            target = Target(
                target.level, target.gtype, target.gid, target.rtype, target.rid, target.vid, True
            )
            shown[xid] = self.read(rows, target, ReadOptions())
        return next(iter(shown.values())) if len(shown) == 1 else shown

    def check_body(self, document: Mapping[str, Any]) -> None:
        """Validate a request body in document form against the configured document schema."""
        if self.document_schema is None:
            return
        problems = self.document_schema.problems(document)
        if problems:
            raise XRegistryError(
                "bad_request",
                "/",
                error_detail=f"the document does not conform to its schema ({len(problems)} problems)",
                problems=problems,
            )

    def _check(self, writer: Writer) -> None:
        problems: list[FieldProblem] = []
        rows = writer.rows
        for xid in sorted(writer.touched_groups):
            row = rows.get(xid)
            if row is not None and row.coll == "endpoints":
                problems += check_endpoint(row.attrs, xid)
            elif row is not None:
                problems += check_group(row.attrs, xid)
                if row.coll == "schemagroups" and (bad := policy_problem(row.attrs, xid)) is not None:
                    problems.append(bad)
        for xid in sorted(writer.touched_resources):
            res = rows.get(xid)
            if res is None:
                continue
            group = rows.get(res.parent)
            group_attrs = group.attrs if group is not None else {}
            for version in rows.children(xid, "versions"):
                if res.coll == MESSAGES.plural:
                    problems += check_message(version.attrs, version.xid, group_attrs.get("envelope"))
                elif res.coll == SCHEMAS.plural:
                    problems += check_schema_version(version.attrs, version.xid, group_attrs.get("format"))
        for xid in sorted(writer.touched_groups | writer.touched_resources | writer.touched_versions):
            row = rows.get(xid)
            if row is not None:
                problems += self._nesting_problems(row)
                if row.kind == "version":
                    problems += self._reference_problems(rows, row)
        if problems:
            self._refuse(problems)
        self.checks.check_written(writer.rows, writer.touched_versions)

    @staticmethod
    def _refuse(problems: list[FieldProblem]) -> None:
        raise XRegistryError(
            "bad_request",
            problems[0].pointer,
            error_detail="; ".join(f"{p.pointer}: {p.message}" for p in problems),
            problems=problems,
        )

    def _nesting_problems(self, row: Row) -> list[FieldProblem]:
        """The entity must fit the nesting limit where the registry document (``/export``)
        places it, so that everything stored can be exported and imported again."""
        # The root object, then one level per path segment; a resource's own attributes sit
        # one level further down, in its ``meta``.
        around = 1 + row.xid.strip("/").count("/") + 1 + (1 if row.kind == "resource" else 0)
        document = schemarefs.document_json(row.doc, row.attrs.get("contenttype"))
        nesting = around + max(jsontext.depth(row.attrs), 1 + jsontext.depth(document)) - 1
        if nesting <= jsontext.MAX_DEPTH:
            return []
        return [
            FieldProblem(
                row.xid,
                f"nests {nesting} levels deep in the registry document; the limit is {jsontext.MAX_DEPTH}",
            )
        ]

    def _reference_problems(self, rows: RegistryRows, version: Row) -> list[FieldProblem]:
        """Every ``$ref`` of a JSON Schema written in this request must stay in the registry."""
        res = rows.get(version.parent)
        group = rows.get(res.parent) if res is not None else None

        def stored_schema(xid: str) -> Any:
            return self._stored_schema(rows, xid)

        if res is None or group is None:
            return []
        uri = self.base + version.xid
        found: list[tuple[str, str]] = []
        where = ""
        if res.coll == SCHEMAS.plural:
            fmt = version.attrs.get("format") or group.attrs.get("format")
            schema = schemarefs.document_json(version.doc, version.attrs.get("contenttype"))
            if fmt is not None and not schemarefs.is_json_schema_format(fmt):
                return []
            if version.doc is not None and schema is None and is_json_type(version.attrs.get("contenttype")):
                reason = "the document is not JSON within the input limits (its contenttype says JSON)"
                return [FieldProblem(f"{version.xid}/{SCHEMAS.singular}", reason)]
            if isinstance(schema, dict):
                where = f"{version.xid}/{SCHEMAS.singular}"
                found = schemarefs.reference_problems(
                    schema, uri, self.base, stored_schema, draft7=_draft7(fmt)
                )
        elif res.coll == MESSAGES.plural:
            fmt = version.attrs.get("dataschemaformat")
            schema = version.attrs.get("dataschema")
            if isinstance(schema, dict) and (fmt is None or schemarefs.is_json_schema_format(fmt)):
                where = f"{version.xid}/dataschema"
                found = schemarefs.reference_problems(
                    schema, uri, self.base, stored_schema, draft7=_draft7(fmt)
                )
        return [FieldProblem(where + pointer, reason) for pointer, reason in found]

    @staticmethod
    def _stored_schema(rows: RegistryRows, xid: str) -> Any:
        """The JSON document of a schema (its default version) or schema version, or None."""
        row = rows.get(xid)
        if row is not None and row.kind == "resource" and row.coll == SCHEMAS.plural:
            versions = rows.children(xid, "versions")
            pinned = row.attrs.get("defaultversionid")
            row = next((v for v in versions if v.eid == pinned), versions[-1] if versions else None)
        if row is None or row.kind != "version" or not row.xid.startswith("/schemagroups/"):
            return None
        return schemarefs.document_json(row.doc, row.attrs.get("contenttype"))

    # ---- reads --------------------------------------------------------------------------

    def root_extra(self, name: str) -> Any:
        """``capabilities``, ``model`` or ``modelsource`` for inlining at the root."""
        if name == "capabilities":
            return capabilities_document()
        if name == "model":
            return model_document()
        return {}

    def read(self, rows: RegistryReader, target: Target, opts: ReadOptions) -> Any:
        """The JSON the API returns for ``target``; ``not_found`` when it does not exist."""
        scope = target.xid if target.level != "registry" else "/"
        if target.level in ("meta", "versions", "version"):
            scope = target.resource_xid
        if opts.defer and target.level == "registry" and opts.branches == [()]:
            # Unfiltered: the root and its groups now, each group's rows when it is rendered
            # (see views.Deferred), all within this one read.
            root = [r for r in [rows.get("/")] if r is not None]
            groups = [g for plural in GROUP_TYPES for g in rows.children("/", plural)]
            view = View(
                Tree(root + groups),
                self.base,
                inline=opts.inline,
                doc=opts.doc,
                root_extras=self.root_extra,
                defer=True,
                subtree=lambda xid: Tree(_with_targets(rows, rows.subtree(xid))),
            )
            tree = view.tree
        else:
            found = rows.subtree(scope) + ([] if scope == "/" else self._ancestors(rows, scope))
            tree = Tree(_with_targets(rows, found))
            view = View(tree, self.base, inline=opts.inline, doc=opts.doc, root_extras=self.root_extra)
        level = target.level
        if level == "registry":
            reg = tree.rows.get("/")
            if reg is None:
                raise XRegistryError("not_found", "/")
            node = Node(reg, "registry")
            # the root is always shown; the filter prunes its collections
            passed = view.passing(node, opts.branches) or opts.branches
            return view.render(node, (), passed, "")
        if level == "groups":
            assert target.gtype is not None
            found = tree.children("/", target.gtype.plural)
            return view.render_collection([Node(r, "group", target.gtype) for r in found], opts.branches)
        if level == "resources":
            self._require(tree, target.group_xid)
            found = tree.children(target.group_xid, target.rtype.plural if target.rtype else "")
            nodes = [Node(r, "resource", target.gtype, target.rtype) for r in found]
            return view.render_collection(nodes, opts.branches)
        if level == "versions":
            self._require(tree, target.resource_xid)
            found = tree.children(target.resource_xid, "versions")
            return view.render_collection(
                [Node(r, "version", target.gtype, target.rtype) for r in found], opts.branches
            )
        row = self._require(tree, target.resource_xid if level == "meta" else target.xid)
        node = Node(row, _NODE_KINDS[level], target.gtype, target.rtype)
        passed = view.passing(node, opts.branches)
        if not passed:
            raise XRegistryError("not_found", target.xid)
        return view.render(node, (), passed, "")

    @staticmethod
    def _ancestors(rows: RegistryReader, xid: str) -> list[Row]:
        found = []
        parts = xid.strip("/").split("/")
        for n in range(2, len(parts), 2):
            row = rows.get("/" + "/".join(parts[:n]))
            if row is not None:
                found.append(row)
        return found

    def _require(self, tree: Tree, xid: str) -> Row:
        row = tree.rows.get(xid)
        if row is None:
            raise XRegistryError("not_found", xid)
        return row

    def raw(self, rows: RegistryReader, target: Target) -> RawDocument:
        """The document of a resource (its default version) or version, for a GET without ``$details``."""
        xid = target.resource_xid
        res = rows.get(xid)
        if res is None:
            raise XRegistryError("not_found", target.xid)
        tree = Tree(_with_targets(rows, [res, *rows.children(xid, "versions")]))
        source = tree.rows.get(res.attrs["xref"]) if isinstance(res.attrs.get("xref"), str) else res
        if target.level == "version":
            version = tree.rows.get(target.xid)
        else:
            version = tree.default_version(source) if source is not None else None
        if version is None:
            raise XRegistryError("not_found", target.xid)
        view = View(tree, self.base, inline=Inline([]), doc=False)
        if target.level == "resource":
            attrs = view.render(Node(res, "resource", target.gtype, target.rtype), (), [()], "")
            attrs["self"] = self.base + xid
        else:
            attrs = view.flat(Node(version, "version", target.gtype, target.rtype))
            attrs["self"] = self.base + version.xid
        assert target.rtype is not None
        url = version.attrs.get(target.rtype.singular + "url")
        return RawDocument(version.doc, attrs, url, self.base + version.xid)

    # ---- lookups the older APIs have ----------------------------------------------------

    def materialized(self, rows: RegistryReader, target: Target) -> dict[str, Any]:
        """A message definition as ``GET`` shows it, with its ``basemessage`` chain merged in."""
        message = self.read(rows, target, ReadOptions())

        def lookup(ref: str) -> dict[str, Any] | None:
            path = ref[len(self.base) :] if ref.startswith(self.base + "/") else ref
            row = rows.get(path)
            if row is not None and row.kind == "resource":
                versions = rows.children(row.xid, "versions")
                pinned = row.attrs.get("defaultversionid")
                row = next((v for v in versions if v.eid == pinned), versions[-1] if versions else None)
            return dict(row.attrs) if row is not None and row.kind == "version" else None

        xid = target.resource_xid if target.level == "resource" else target.xid
        return resolve(message, lookup, xid)

    def find_by_uri(self, uri: str, rtype_plural: str) -> Target:
        """The schema version / message addressed by ``uri`` (absolute URL here, or an xid)."""
        from cebroker.registry.paths import xid_to_target

        path = uri.split("#", 1)[0]
        if path.startswith(self.base + "/"):
            path = path[len(self.base) :]
        elif "://" in path:
            raise XRegistryError("not_found", "/", detail=f"{uri} is not a URI of this registry")
        if path.endswith("$details"):
            path = path[: -len("$details")]
        target = xid_to_target(path)
        if target is None or target.rtype is None or target.rtype.plural != rtype_plural:
            raise XRegistryError("not_found", "/", detail=f"{uri} names no {rtype_plural[:-1]} here")
        if target.level not in ("resource", "version"):
            raise XRegistryError(
                "not_found", target.xid, detail=f"{uri} names no {rtype_plural[:-1]} version"
            )
        return target


def _with_targets(rows: RegistryReader, found: list[Row]) -> list[Row]:
    """``found`` and, for each resource among them with an ``xref``, its target and the target's
    versions (which the resource shows)."""
    have = {r.xid for r in found}
    extra: list[Row] = []
    for row in found:
        xref = row.attrs.get("xref") if row.kind == "resource" else None
        if isinstance(xref, str) and xref not in have:
            target = rows.get(xref)
            if target is not None:
                for each in [target, *rows.children(xref, "versions")]:
                    if each.xid not in have:
                        have.add(each.xid)
                        extra.append(each)
    return found + extra
