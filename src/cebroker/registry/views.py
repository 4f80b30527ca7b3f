"""Rendering stored entities as the JSON the API returns, with ``inline``, ``filter`` and ``doc``.

A :class:`Node` wraps a stored row with its place in the model. :class:`View` renders a node
and, recursively, the collections the request inlines, pruning entities that do not pass the
filter and counting only those that do. In document view (``?doc``) ``self`` and the URLs of
inlined collections become ``#/json/pointer`` references into the output, and resources show
only their own attributes (not their default version's).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from cefilters.errors import pointer_token
from ceprotocols import jsontext

from cebroker.registry.model import GROUP_TYPES, SPEC_VERSION, GroupType, ResourceType
from cebroker.registry.query import Branch, Inline, split_branch
from cebroker.registry.versions import is_json_type
from cebroker.storage.registry import Row

NodeKind = Literal["registry", "group", "resource", "meta", "version"]


@dataclass(frozen=True, slots=True)
class Node:
    """A stored entity with its place in the model."""

    row: Row
    kind: NodeKind
    gtype: GroupType | None = None
    rtype: ResourceType | None = None

    @property
    def xid(self) -> str:
        return self.row.xid + ("/meta" if self.kind == "meta" else "")


class Tree:
    """Rows loaded for one read, indexed by xid and by (parent, collection)."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self.rows: dict[str, Row] = {}
        self.kids: dict[tuple[str, str], list[Row]] = {}
        for row in rows:
            self.rows[row.xid] = row
            self.kids.setdefault((row.parent, row.coll), []).append(row)
        for key, kids in self.kids.items():
            if key[1] != "versions":  # versions stay in creation order
                kids.sort(key=lambda r: r.eid.lower())

    def children(self, xid: str, coll: str) -> list[Row]:
        return self.kids.get((xid, coll), [])

    def default_version(self, res: Row) -> Row | None:
        vid = res.attrs.get("defaultversionid")
        row = self.rows.get(f"{res.xid}/versions/{vid}") if vid is not None else None
        if row is None:
            versions = self.children(res.xid, "versions")
            row = versions[-1] if versions else None
        return row


@dataclass(frozen=True, slots=True)
class Deferred:
    """An inlined collection of the registry's groups, each rendered only when the answer is
    written out (:func:`cebroker.registry.http.json_stream`): a large registry is never held
    rendered whole, and its rendering is spread over the writing of the answer."""

    entries: Sequence[tuple[str, Callable[[], dict[str, Any]]]]


class View:
    """Renders nodes for one request; with ``defer`` the group collections of the registry
    come out as :class:`Deferred`."""

    def __init__(
        self,
        tree: Tree,
        base: str,
        *,
        inline: Inline,
        doc: bool,
        root_extras: Callable[[str], Any] | None = None,
        defer: bool = False,
        subtree: Callable[[str], Tree] | None = None,
    ) -> None:
        self.tree = tree
        self.base = base
        self.inline = inline
        self.doc = doc
        self.root_extras = root_extras
        self.defer = defer
        #: reads one group's rows when a deferred group is rendered (None: they are in ``tree``)
        self.subtree = subtree

    # ---- nodes and their children -------------------------------------------------------

    def children(self, node: Node) -> list[tuple[str, list[Node]]]:
        """Child collections of ``node``, in serialization order."""
        xid = node.row.xid
        if node.kind == "registry":
            return [
                (p, [Node(r, "group", gt) for r in self.tree.children("/", p)])
                for p, gt in GROUP_TYPES.items()
            ]
        if node.kind == "group":
            assert node.gtype is not None
            return [
                (p, [Node(r, "resource", node.gtype, rt) for r in self.tree.children(xid, p)])
                for p, rt in node.gtype.resources.items()
            ]
        if node.kind == "resource":
            # A resource with an xref has no versions of its own: it shows its target's (in the
            # document view nothing: the xref is what an export carries).
            source = self.versions_of(node.row)
            kids = [] if source is None else self.tree.children(source.xid, "versions")
            versions = [Node(r, "version", node.gtype, node.rtype) for r in kids]
            return [("meta", [Node(node.row, "meta", node.gtype, node.rtype)]), ("versions", versions)]
        return []

    def versions_of(self, res: Row) -> Row | None:
        """The resource whose versions ``res`` shows: itself, or the target of its ``xref``
        (None in the document view, or when the target is not there)."""
        xref = res.attrs.get("xref")
        if not isinstance(xref, str):
            return res
        return None if self.doc else self.tree.rows.get(xref)

    def _default_of(self, res: Row) -> Row | None:
        source = self.versions_of(res)
        return self.tree.default_version(source) if source is not None else None

    def flat(self, node: Node, pointer: str | None = None) -> dict[str, Any]:
        """The node's own attributes (no inlined collections)."""
        row = node.row
        url = self.base + row.xid
        if node.kind == "registry":
            out: dict[str, Any] = {"specversion": SPEC_VERSION, "registryid": row.attrs.get("registryid")}
            out["self"] = self._self(url + "/" if row.xid != "/" else self.base + "/", pointer)
            out["xid"] = "/"
            out.update(_attrs(row.attrs, exclude={"registryid"}))
            return out
        if node.kind == "group":
            assert node.gtype is not None
            out = {node.gtype.id_attr: row.eid, "self": self._self(url, pointer), "xid": row.xid}
            out.update(_attrs(row.attrs))
            return out
        assert node.rtype is not None
        rtype = node.rtype
        details = "$details" if rtype.hasdocument else ""
        if node.kind == "meta":
            out = {
                rtype.id_attr: row.eid,
                "self": self._self(url + "/meta", pointer),
                "xid": row.xid + "/meta",
            }
            out.update(_attrs(row.attrs))
            out.setdefault("readonly", False)
            out.setdefault("compatibility", "none")
            default = self._default_of(row)
            if default is not None:
                out["defaultversionid"] = default.eid
                out["defaultversionurl"] = self._ref(f"{url}/versions/{default.eid}{details}", None)
            out["defaultversionsticky"] = bool(row.attrs.get("defaultversionsticky", False))
            return out
        if node.kind == "version":
            res = self.tree.rows.get(row.parent)
            default = self.tree.default_version(res) if res is not None else None
            out = {rtype.id_attr: _resource_id(row), "versionid": row.eid}
            out["self"] = self._self(url + details, pointer)
            out["xid"] = row.xid
            out.update(_attrs(row.attrs))
            out["isdefault"] = default is not None and default.xid == row.xid
            return out
        # resource: its own id, self, xid, then the default version's attributes (API view)
        out = {rtype.id_attr: row.eid}
        default = self._default_of(row)
        if default is not None and not self.doc:
            out["versionid"] = default.eid
        out["self"] = self._self(url + details, pointer)
        out["xid"] = row.xid
        if default is not None and not self.doc:
            out.update(_attrs(default.attrs))
            out["isdefault"] = True
        return out

    def _self(self, url: str, pointer: str | None) -> str:
        return "#" + pointer if self.doc and pointer is not None else url

    def _ref(self, url: str, pointer: str | None) -> str:
        return "#" + pointer if self.doc and pointer is not None else url

    def document(self, node: Node) -> dict[str, Any]:
        """The ``<singular>``/``<singular>base64`` inline form of a version's document."""
        assert node.rtype is not None
        row = node.row
        if node.kind == "resource":
            default = self._default_of(row)
            if default is None:
                return {}
            row = default
        key = node.rtype.singular
        if row.doc is None:
            return {}
        if is_json_type(row.attrs.get("contenttype")):
            try:
                return {key: jsontext.loads(row.doc)}
            except jsontext.JsonTextError:
                pass  # not JSON within the input limits: shown as text (or base64) instead
        try:
            return {key: row.doc.decode("utf-8")}
        except UnicodeDecodeError:
            return {key + "base64": base64.b64encode(row.doc).decode("ascii")}

    # ---- filters ------------------------------------------------------------------------

    def matches(self, node: Node, branch: Branch) -> bool:
        """True when ``node`` (and some of its descendants, for nested paths) satisfy ``branch``."""
        kids = dict(self.children(node))
        own, nested = split_branch(branch, set(kids))
        if own:
            attrs = View(self.tree, self.base, inline=Inline([]), doc=False).flat(node)
            if not all(e.test(attrs) for e in own):
                return False
        return all(any(self.matches(k, tuple(exprs)) for k in kids[c]) for c, exprs in nested.items())

    def passing(self, node: Node, branches: list[Branch]) -> list[Branch]:
        """The branches ``node`` satisfies (empty: the node is filtered out)."""
        return [b for b in branches if self.matches(node, b)]

    # ---- rendering ----------------------------------------------------------------------

    def render(
        self, node: Node, path: tuple[str, ...], branches: list[Branch], pointer: str
    ) -> dict[str, Any]:
        """``node`` with the collections the request inlines (``branches`` already passed)."""
        out = self.flat(node, pointer)
        if node.kind == "registry" and self.root_extras is not None:
            for extra in ("capabilities", "model", "modelsource"):
                if self.inline.wants((extra,)) and len(path) == 0:
                    out[extra] = self.root_extras(extra)
        if self._inlines_document(node, path):
            out.update(self.document(node))
        url = self.base + (node.row.xid if node.kind != "registry" else "")
        for coll, kids in self.children(node):
            sub_path = (*path, coll)
            child_branches = [tuple(split_branch(b, {coll})[1].get(coll, [])) for b in branches] or [()]
            kept = [(k, self.passing(k, child_branches)) for k in kids]
            kept = [(k, bs) for k, bs in kept if bs]
            sub_pointer = f"{pointer}/{coll}"
            wanted = self.inline.wants(sub_path)
            if coll == "meta":
                out["metaurl"] = self._ref(url + "/meta", sub_pointer if wanted else None)
                if wanted and kept:
                    out["meta"] = self.render(kept[0][0], sub_path, kept[0][1], sub_pointer)
                continue
            if not (self.doc and wanted and coll == "versions"):
                # In document view inlined versions stand for themselves, without a
                # versionsurl pointing at the map beside them: the xRegistry tool's document
                # schema (xrcg) takes a resource with versions or with versionsurl, not both.
                out[coll + "url"] = self._ref(f"{url}/{coll}", sub_pointer if wanted else None)
                out[coll + "count"] = len(kept)
            if wanted:
                pointers = [f"{sub_pointer}/{pointer_token(k.row.eid)}" for k, _ in kept]
                if self.defer and node.kind == "registry":
                    out[coll] = Deferred(
                        [
                            (k.row.eid, partial(self._expanded, k, sub_path, bs, ptr))
                            for (k, bs), ptr in zip(kept, pointers, strict=True)
                        ]
                    )
                else:
                    out[coll] = {
                        k.row.eid: self.render(k, sub_path, bs, ptr)
                        for (k, bs), ptr in zip(kept, pointers, strict=True)
                    }
        meta = out.get("meta")
        if self.doc and isinstance(meta, dict) and "defaultversionid" in meta and "versions" in out:
            meta["defaultversionurl"] = f"#{pointer}/versions/{pointer_token(meta['defaultversionid'])}"
        return out

    def _expanded(
        self, node: Node, path: tuple[str, ...], branches: list[Branch], pointer: str
    ) -> dict[str, Any]:
        """A deferred group, rendered over its own rows (read now, within the same read)."""
        if self.subtree is None:
            return self.render(node, path, branches, pointer)
        tree = self.subtree(node.row.xid)
        view = View(tree, self.base, inline=self.inline, doc=self.doc)
        row = tree.rows.get(node.row.xid, node.row)
        return view.render(Node(row, node.kind, node.gtype, node.rtype), path, branches, pointer)

    def _inlines_document(self, node: Node, path: tuple[str, ...]) -> bool:
        rtype = node.rtype
        if rtype is None or not rtype.hasdocument or node.kind not in ("resource", "version"):
            return False
        if self.doc and node.kind == "resource":
            return False  # document view shows documents in the versions only
        return self.inline.wants((*path, rtype.singular))

    def render_collection(self, nodes: list[Node], branches: list[Branch]) -> dict[str, Any]:
        """A collection response: a map of id to entity, filtered."""
        out: dict[str, Any] = {}
        for node in nodes:
            passed = self.passing(node, branches)
            if passed:
                out[node.row.eid] = self.render(node, (), passed, "/" + pointer_token(node.row.eid))
        return out


def _resource_id(version: Row) -> str:
    # .../<rid>/versions/<vid>
    return version.xid.rsplit("/", 3)[1]


_HIDDEN = frozenset({"epoch", "createdat", "modifiedat"})


def _attrs(attrs: dict[str, Any], exclude: Iterable[str] = ()) -> dict[str, Any]:
    """Stored attributes in output order: epoch first, timestamps after the rest."""
    skip = set(exclude)
    out: dict[str, Any] = {}
    if "epoch" in attrs:
        out["epoch"] = attrs["epoch"]
    for k, v in attrs.items():
        if k not in _HIDDEN and k not in skip and k not in ("defaultversionid", "defaultversionsticky"):
            out[k] = v
    for k in ("createdat", "modifiedat"):
        if k in attrs:
            out[k] = attrs[k]
    return out
