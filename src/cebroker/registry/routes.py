"""Starlette routes of the registry: ``/``, ``/model``, ``/capabilities``, ``/export``, the group
collections, and the ``/schema?uri=`` and ``/messagedefinition?uri=`` lookups.

Only the registry's own paths are routed, so the broker's other APIs (``/subscriptions``,
``/events``, ...) are never shadowed.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cebroker.registry import http
from cebroker.registry.capabilities import capabilities_document
from cebroker.registry.errors import XRegistryError, render_error
from cebroker.registry.model import GROUP_TYPES, model_document
from cebroker.registry.operations import ALLOWED, not_supported, write_op
from cebroker.registry.paging import next_link, page, parse_paging
from cebroker.registry.paths import Target, parse_path
from cebroker.registry.query import Inline
from cebroker.registry.service import DryRun, RawDocument, ReadOptions, WriteResult
from cebroker.registry.versions import DocInput, is_json_type
from cebroker.storage.errors import StorageUnavailable

_ALL = ["GET", "HEAD", "PUT", "PATCH", "POST", "DELETE", "OPTIONS"]


class Backend(Protocol):
    """What the routes need from the registry component."""

    base: str

    async def read(self, target: Target, opts: ReadOptions) -> Any:
        """Render ``target``."""
        ...

    async def raw(self, target: Target) -> RawDocument:
        """A document for a GET without ``$details``."""
        ...

    async def read_pieces(
        self, target: Target, opts: ReadOptions, shape: Callable[[Any], Any]
    ) -> list[bytes]:
        """Render ``target`` through ``shape`` and encode it, in one read off the event loop."""
        ...

    async def write(self, op: Any, ignore: frozenset[str], *, dry_run: bool = False) -> WriteResult:
        """Run one write transaction and announce its changes (``dry_run``: check, keep nothing,
        raise :class:`DryRun` when the checks pass)."""
        ...

    async def find_by_uri(self, uri: str, plural: str) -> Target:
        """Resolve a schema/message URI to a target."""
        ...

    async def check_body(self, document: Any) -> None:
        """Validate an imported document against the configured document schema."""
        ...

    async def materialized(self, target: Target) -> Any:
        """A message definition with its ``basemessage`` chain merged in."""
        ...


Handler = Callable[[Request], Awaitable[Response]]


class RegistryRoutes:
    """HTTP handlers over a :class:`Backend`."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @property
    def link(self) -> dict[str, str]:
        return http.link_header(self.backend.base)

    def routes(self) -> list[BaseRoute]:
        """Every registry route."""
        routes: list[BaseRoute] = [
            Route("/", self._guard(self.entity), methods=_ALL),
            Route("/model", self._guard(self.model), methods=_ALL),
            Route("/modelsource", self._guard(self.modelsource), methods=_ALL),
            Route("/capabilities", self._guard(self.capabilities), methods=_ALL),
            Route("/export", self._guard(self.export), methods=_ALL),
            Route("/schema", self._guard(self.schema_by_uri), methods=_ALL),
            Route("/messagedefinition", self._guard(self.message_by_uri), methods=_ALL),
        ]
        for plural in GROUP_TYPES:
            routes.append(Route(f"/{plural}", self._guard(self.entity), methods=_ALL))
            routes.append(Route(f"/{plural}/{{rest:path}}", self._guard(self.entity), methods=_ALL))
        return routes

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except XRegistryError as err:
                return render_error(err, str(request.url), self.link)
            except StorageUnavailable as exc:
                # The spec's name for "try again later"; the detail names the storage's cause.
                retry = {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
                busy = XRegistryError("server_busy", request.url.path, detail=str(exc), headers=retry)
                return render_error(busy, str(request.url), self.link)
            except _Options as opt:  # OPTIONS on a read-only path (/schema, /messagedefinition)
                return opt.response(self.link)

        return guarded

    def _read_only(self, request: Request, subject: str) -> None:
        if request.method == "OPTIONS":
            raise _Options("GET, HEAD, OPTIONS")
        if request.method not in ("GET", "HEAD"):
            raise XRegistryError(
                "action_not_supported",
                subject,
                action=request.method,
                headers={"Allow": "GET, HEAD, OPTIONS"},
            )

    async def model(self, request: Request) -> Response:
        return await self._static(request, "/model", model_document)

    async def modelsource(self, request: Request) -> Response:
        return await self._static(request, "/modelsource", dict)

    async def capabilities(self, request: Request) -> Response:
        return await self._static(request, "/capabilities", capabilities_document)

    async def _static(self, request: Request, subject: str, make: Callable[[], Any]) -> Response:
        try:
            self._read_only(request, subject)
        except _Options as opt:
            return opt.response(self.link)
        return http.json_response(make(), 200, self.link)

    async def export(self, request: Request) -> Response:
        """``/export`` = ``GET /?doc&inline=*,capabilities,modelsource``."""
        try:
            self._read_only(request, "/export")
        except _Options as opt:
            return opt.response(self.link)
        http.check_specversion(request, "/export")
        opts = ReadOptions(inline=Inline([("*",), ("capabilities",), ("modelsource",)]), doc=True, defer=True)
        collections = "collections" in request.query_params
        pieces = await self.backend.read_pieces(
            Target("registry"),
            opts,
            lambda body: _collections_only(body, Target("registry")) if collections else body,
        )
        return http.pieces_response(pieces, 200, self.link)

    async def schema_by_uri(self, request: Request) -> Response:
        """Schema Registry API: a schema version by its URI, as the raw document."""
        target = await self._by_uri(request, "/schema", "schemas")
        doc = await self.backend.raw(target)
        return http.document_response(doc, 200, self.link, target.rid or "")

    async def message_by_uri(self, request: Request) -> Response:
        """Message Catalog API: a message definition by its URI, complete: the older API has no
        ``basemessage``, so the chain is merged in."""
        target = await self._by_uri(request, "/messagedefinition", "messages")
        return await http.json_answer(await self.backend.materialized(target), 200, self.link)

    async def _by_uri(self, request: Request, subject: str, plural: str) -> Target:
        self._read_only(request, subject)
        uri = request.query_params.get("uri")
        if not uri:
            raise XRegistryError("bad_request", subject, error_detail="the query parameter 'uri' is required")
        return await self.backend.find_by_uri(uri, plural)

    # ---- the entity tree ----------------------------------------------------------------

    async def entity(self, request: Request) -> Response:
        """Every method on ``/`` and ``/<GROUPS>/...``."""
        target = parse_path(request.url.path)
        method = request.method
        if method == "OPTIONS":
            return _Options(", ".join([*ALLOWED[target.level], "HEAD", "OPTIONS"])).response(self.link)
        if method in ("GET", "HEAD"):
            return await self._get(request, target)
        if method == "DELETE" and target.level in ("registry", "meta"):
            raise not_supported(method, target)
        return await self._write(request, target)

    async def _get(self, request: Request, target: Target) -> Response:
        if self._is_document(target) and not target.details:
            doc = await self.backend.raw(target)
            return http.document_response(doc, 200, self.link, target.rid or "")
        opts = http.read_options(request, target)
        collections = "collections" in request.query_params
        if collections:
            if target.level not in ("registry", "group"):
                raise XRegistryError("bad_flag", target.xid, flag="collections")
            if not opts.inline.paths:
                opts = ReadOptions(inline=Inline([("*",)]), doc=opts.doc, branches=opts.branches)
        paging = parse_paging(request.query_params, target.xid)
        if paging.active and target.level not in ("groups", "resources", "versions"):
            raise XRegistryError("bad_flag", target.xid, flag="sort" if paging.sort else "limit")
        if target.level == "registry":  # possibly the whole registry (see jsonout)
            opts = ReadOptions(inline=opts.inline, doc=opts.doc, branches=opts.branches, defer=True)
            pieces = await self.backend.read_pieces(
                target, opts, lambda body: _collections_only(body, target) if collections else body
            )
            return http.pieces_response(pieces, 200, self.link)
        body = await self.backend.read(target, opts)
        if collections:
            body = _collections_only(body, target)
        headers = dict(self.link)
        if paging.active:
            body, total, more = page(body, paging)
            if more:
                url = str(request.url).split("?", 1)[0]
                headers["Link"] += ", " + next_link(url, request.query_params, paging, total)
        return await http.json_answer(body, 200, headers)

    @staticmethod
    def _is_document(target: Target) -> bool:
        return (
            target.rtype is not None and target.rtype.hasdocument and target.level in ("resource", "version")
        )

    async def _write(self, request: Request, target: Target) -> Response:
        method = request.method
        # Every flag is checked before anything is written: a refused request changes nothing.
        opts = http.read_options(request, target)
        ignore = http.ignore_flags(request)
        epoch = http.epoch_flag(request, target.xid)
        data = await http.read_body(request)
        doc: DocInput | None = None
        raw_doc = self._is_document(target) and not target.details and method in ("PUT", "POST", "PATCH")
        if raw_doc:
            if method == "PATCH":
                raise XRegistryError("details_required", target.xid)
            body: Any = http.header_attributes(request, target.xid)
            if is_json_type(request.headers.get("content-type")):
                # A document that says it is JSON must be JSON (an empty body is not), or it
                # would be served back as JSON that no client can read.
                await http.parse_json(data, target.xid, required=True)
            doc = DocInput(data, request.headers.get("content-type"))
        else:
            if target.details and http.has_xregistry_headers(request):
                raise XRegistryError("extra_xregistry_header", target.xid, name="xRegistry-*")
            body = await http.parse_json(data, target.xid, required=method != "DELETE")
            if target.level == "registry" and method == "POST":
                await self.backend.check_body(body)
        op = write_op(
            method,
            target,
            body,
            doc=doc,
            setdefault=request.query_params.get("setdefaultversionid"),
            epoch=epoch,
        )
        if "check" in request.query_params:
            # A dry run: every check of the write, nothing kept, no change event.
            try:
                await self.backend.write(op, ignore, dry_run=True)
            except DryRun as passed:
                if passed.status == 204:  # a delete: nothing to show
                    return Response(status_code=204, headers=self.link)
                return await http.json_answer(passed.body, passed.status, self.link)
            raise AssertionError("a dry run always ends in DryRun or a refusal")  # pragma: no cover
        result = await self.backend.write(op, ignore)
        return await self._write_response(target, opts, result, raw_doc)

    async def _write_response(
        self, target: Target, opts: ReadOptions, result: WriteResult, raw_doc: bool
    ) -> Response:
        headers = dict(self.link)
        if len(result.changes):
            headers["xRegistry-xregcorrelationid"] = result.changes.correlation
        if result.status == 204:
            return Response(status_code=204, headers=headers)
        if result.body_override is not None:
            body = {
                plural: {i: await self.backend.read(self._child(target, plural, i), opts) for i in ids}
                for plural, ids in result.body_override.items()
            }
            return await http.json_answer(body, 200, headers)
        if target.level in ("groups", "resources", "versions"):
            out = {}
            for xid in result.xids:
                out[xid.rsplit("/", 1)[1]] = await self.backend.read(parse_path(xid), opts)
            return await http.json_answer(out, 200, headers)
        shown = parse_path(result.xids[0]) if result.xids else target
        if target.details or (target.level == "resource" and shown.level != "version"):
            shown = Target(
                shown.level, shown.gtype, shown.gid, shown.rtype, shown.rid, shown.vid, target.details
            )
        if result.status == 201:
            headers["Location"] = (
                self.backend.base + (result.location or shown.xid) + ("$details" if target.details else "")
            )
        if raw_doc:
            doc = await self.backend.raw(shown)
            return http.document_response(doc, result.status, headers, shown.rid or "")
        body = await self.backend.read(shown, opts)
        return await http.json_answer(body, result.status, headers)

    @staticmethod
    def _child(target: Target, plural: str, eid: str) -> Target:
        base = "" if target.level == "registry" else target.xid
        return parse_path(f"{base}/{plural}/{eid}")


def _collections_only(body: dict[str, Any], target: Target) -> dict[str, Any]:
    """``?collections``: only the child collection maps, ready to ``POST`` to another registry."""
    names = GROUP_TYPES if target.gtype is None else target.gtype.resources
    return {name: body[name] for name in names if name in body}


class _Options(Exception):
    def __init__(self, allow: str) -> None:
        self.allow = allow

    def response(self, link: dict[str, str]) -> Response:
        return Response(
            status_code=204, headers={**link, "Allow": self.allow, "Access-Control-Allow-Methods": self.allow}
        )
