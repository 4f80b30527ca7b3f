"""Pull replication: copy another xRegistry into this broker's registry, optionally following it.

``pull`` reads the source's ``/export`` (falling back to ``/?doc&inline=*`` for servers
without it), drops what the server computes (``self``, ``xid``, epochs, URLs, counts), and
imports the rest with ``POST /?ignore=epoch`` into the target, so the copy keeps ids,
versions, default versions and documents, and the target announces the changes as usual.

``follow`` then keeps the copy current through the source's change events: it serves a small
HTTP sink, creates a subscription on the source (``<source>/subscriptions``, a CloudEvents
Subscriptions API, with a prefix filter on ``type`` ``io.xregistry.``) and for each event
re-imports the group the ``subject`` belongs to, or deletes the subject on ``*.deleted``.
The subscription is deleted when following stops.

Entities deleted at the source while nobody followed are not deleted here (a pull only adds
and updates; the target may hold definitions of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from ceprotocols import jsontext

from cebroker.errors import IncompleteRequest, PayloadTooLarge
from cebroker.registry.model import GROUP_TYPES
from cebroker.web.body import read_limited

#: Largest change event the follower's sink accepts.
MAX_EVENT_BODY = 1024 * 1024

log = logging.getLogger("cebroker.registry.sync")

#: Attributes a server computes: never copied.
_COMPUTED = frozenset(
    {"self", "shortself", "xid", "epoch", "isdefault", "metaurl", "versionsurl", "defaultversionurl"}
)
_COLLECTIONS = frozenset({*GROUP_TYPES, "messages", "schemas", "versions"})
_META_KEPT = frozenset({"defaultversionid", "defaultversionsticky", "compatibility", "deprecated"})


class SyncError(Exception):
    """The source or the target answered in a way the copy cannot go on from."""


@dataclass(frozen=True, slots=True)
class SyncReport:
    """How much one pull copied."""

    groups: int
    resources: int


def strip(entity: Mapping[str, Any]) -> dict[str, Any]:
    """An exported entity without computed attributes, recursively through its collections."""
    out: dict[str, Any] = {}
    for key, value in entity.items():
        if key in _COMPUTED or _is_collection_link(key):
            continue
        if key == "meta" and isinstance(value, dict):
            out["meta"] = {k: v for k, v in value.items() if k in _META_KEPT}
        elif key in _COLLECTIONS and isinstance(value, dict):
            out[key] = {k: strip(v) for k, v in value.items() if isinstance(v, dict)}
        else:
            out[key] = value
    return out


def _is_collection_link(key: str) -> bool:
    """``<collection>url`` and ``<collection>count`` (but not e.g. a document's ``schemaurl``)."""
    return any(key.endswith(suffix) and key[: -len(suffix)] in _COLLECTIONS for suffix in ("url", "count"))


def groups_of(export: Mapping[str, Any], skip_endpoints: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The group maps of an exported registry, ready for ``POST /``."""
    doc: dict[str, Any] = {}
    for plural in GROUP_TYPES:
        groups = export.get(plural)
        if isinstance(groups, dict):
            kept = {
                gid: strip(g)
                for gid, g in groups.items()
                if not (plural == "endpoints" and gid in skip_endpoints)
            }
            if kept:
                doc[plural] = kept
    return doc


class Replicator:
    """Copies ``source`` into ``target`` (both registry base URLs) over HTTP."""

    def __init__(
        self,
        source: str,
        target: str,
        client: httpx.AsyncClient,
        *,
        skip_endpoints: frozenset[str] = frozenset({"cebroker.subscriptions", "cebroker.events"}),
    ) -> None:
        self.source = source.rstrip("/")
        self.target = target.rstrip("/")
        self.client = client
        self.skip_endpoints = skip_endpoints

    async def _get(self, url: str) -> Any:
        try:
            response = await self.client.get(url)
        except httpx.HTTPError as exc:
            raise SyncError(f"GET {url}: {exc}") from exc
        if response.status_code != 200:
            raise SyncError(f"GET {url}: HTTP {response.status_code} {response.text[:300]}")
        try:
            return jsontext.loads(response.content)
        except jsontext.JsonTextError as exc:
            raise SyncError(f"GET {url}: not JSON within the input limits ({exc})") from exc

    async def _import(self, doc: Mapping[str, Any]) -> None:
        if not doc:
            return
        url = f"{self.target}/?ignore=epoch"
        try:
            response = await self.client.post(url, json=doc)
        except httpx.HTTPError as exc:
            raise SyncError(f"POST {url}: {exc}") from exc
        if response.status_code != 200:
            raise SyncError(f"POST {url}: HTTP {response.status_code} {response.text[:1000]}")

    async def pull(self) -> SyncReport:
        """Copy everything once."""
        try:
            export = await self._get(f"{self.source}/export")
        except SyncError:
            export = await self._get(f"{self.source}/?doc&inline=*")
        doc = groups_of(export, self.skip_endpoints)
        await self._import(doc)
        groups = sum(len(v) for v in doc.values())
        resources = sum(
            len(res)
            for gs in doc.values()
            for g in gs.values()
            for k, res in g.items()
            if k in ("messages", "schemas")
        )
        return SyncReport(groups, resources)

    async def apply(self, event: Mapping[str, Any]) -> None:
        """Bring the target in line with one change event of the source."""
        subject, kind = event.get("subject"), str(event.get("type", ""))
        if (
            not isinstance(subject, str)
            or not subject.startswith("/")
            or not kind.startswith("io.xregistry.")
        ):
            return
        parts = subject.strip("/").split("/")
        if not parts[0] or parts[0] not in GROUP_TYPES:
            return  # registry-level changes carry nothing to copy
        if parts[0] == "endpoints" and len(parts) > 1 and parts[1] in self.skip_endpoints:
            return
        if kind.endswith(".deleted"):
            response = await self.client.delete(f"{self.target}{subject}")
            if response.status_code not in (200, 204, 404):
                raise SyncError(f"DELETE {subject}: HTTP {response.status_code} {response.text[:300]}")
            return
        if len(parts) < 2:
            return
        group_xid = "/" + "/".join(parts[:2])
        try:
            group = await self._get(f"{self.source}{group_xid}?doc&inline=*")
        except SyncError:
            return  # gone again meanwhile: its deleted event follows
        await self._import({parts[0]: {parts[1]: strip(group)}})

    @contextlib.asynccontextmanager
    async def subscription(self, sink: str) -> AsyncIterator[str]:
        """A subscription on the source delivering its registry change events to ``sink``."""
        body = {
            "protocol": "HTTP",
            "sink": sink,
            "filters": [{"prefix": {"type": "io.xregistry."}}],
        }
        try:
            response = await self.client.post(f"{self.source}/subscriptions", json=body)
        except httpx.HTTPError as exc:
            raise SyncError(f"cannot subscribe at {self.source}/subscriptions: {exc}") from exc
        if response.status_code != 201:
            raise SyncError(
                f"subscribing at {self.source}: HTTP {response.status_code} {response.text[:300]}"
            )
        sub_id = str(response.json()["id"])
        try:
            yield sub_id
        finally:
            with contextlib.suppress(httpx.HTTPError):
                await self.client.delete(f"{self.source}/subscriptions/{sub_id}")


def event_from_request(headers: Mapping[str, str], body: bytes) -> dict[str, Any] | None:
    """A CloudEvent from an HTTP delivery (structured JSON or binary mode); None if neither."""
    ctype = headers.get("content-type", "")
    if ctype.startswith("application/cloudevents+json"):
        try:
            event = jsontext.loads(body)
        except jsontext.JsonTextError:
            return None
        return event if isinstance(event, dict) else None
    attrs = {k[3:].lower(): v for k, v in headers.items() if k.lower().startswith("ce-")}
    return attrs if "type" in attrs else None


async def follow(
    replicator: Replicator, host: str, port: int, stop: asyncio.Event, sink_url: str | None = None
) -> None:
    """Serve a sink on ``host:port`` (reached by the source as ``sink_url``), subscribe at the
    source and apply its changes until ``stop`` is set."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=10_000)

    async def receive(request: Request) -> Response:
        if request.method == "OPTIONS":  # CloudEvents webhook validation handshake
            origin = request.headers.get("webhook-request-origin", "*")
            return Response(status_code=200, headers={"WebHook-Allowed-Origin": origin, "Allow": "POST"})
        try:
            body = await read_limited(request, MAX_EVENT_BODY)
        except PayloadTooLarge:
            return Response(status_code=413)
        except IncompleteRequest:
            return Response(status_code=400)
        event = event_from_request(request.headers, body)
        if event is None:
            return Response(status_code=400)
        await queue.put(event)
        return Response(status_code=202)

    app = Starlette(routes=[Route("/", receive, methods=["POST", "OPTIONS"])])
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                raise SyncError(f"cannot listen on {host}:{port}")
            await asyncio.sleep(0.02)
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
        async with replicator.subscription(sink_url or f"http://{host}:{bound}/"):
            await replicator.pull()  # changes made before the subscription existed
            while not stop.is_set():
                try:
                    event = await asyncio.wait_for(queue.get(), timeout=0.5)
                except TimeoutError:
                    continue
                try:
                    await replicator.apply(event)
                except SyncError as exc:
                    log.warning("change %s %s not applied: %s", event.get("type"), event.get("subject"), exc)
    finally:
        server.should_exit = True
        await serving
