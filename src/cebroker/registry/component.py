"""The registry as a :class:`cebroker.app.Component`: routes, change events, validator.

Every read and write runs in the storage's registry store (its threads, its transactions).
After a write commits, the definition index behind :attr:`RegistryComponent.validator` is
rebuilt in one read and the write's change events go to the broker's :class:`Ingestor`. The
write has already committed by then, so a failed ingest is logged, not undone. When another
broker instance writes to a shared store, the store says so (``watch``) and the index is
rebuilt too (the change events are that instance's to send).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.routing import BaseRoute

from cebroker.contracts import Ingestor
from cebroker.errors import BrokerError
from cebroker.registry import jsonout
from cebroker.registry.advertise import Advertiser
from cebroker.registry.brokerdefs import BrokerEventDefinitions
from cebroker.registry.changes import ChangeLog, build_events
from cebroker.registry.datachecks import CompiledSchemas
from cebroker.registry.documents import DocumentSchema
from cebroker.registry.entities import now_rfc3339
from cebroker.registry.paths import Target
from cebroker.registry.routes import RegistryRoutes
from cebroker.registry.service import RawDocument, ReadOptions, RegistryCore, WriteResult
from cebroker.registry.validation import DefinitionIndex, RegistryValidator
from cebroker.registry.writes import Writer
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.registry import RegistryStore

log = logging.getLogger("cebroker.registry")

#: Seconds before a failed rebuild of the definition index (after another instance's write) is
#: tried again.
REBUILD_RETRY = 1.0


class RegistryComponent:
    """Serves the xRegistry and announces its changes; see the module docstring."""

    def __init__(
        self,
        store: RegistryStore,
        base_url: str,
        *,
        ingestor: Ingestor | None = None,
        document_schema: Path | None = None,
        advertiser: Advertiser | None = None,
        check_events: bool = True,
        broker_events: bool = False,
        validator: RegistryValidator | None = None,
    ) -> None:
        self.base = base_url.rstrip("/")
        self.store = store
        self.core = RegistryCore(self.base, DocumentSchema(document_schema) if document_schema else None)
        if broker_events:  # before the advertiser, which lists every message group
            self.core.hooks.append(BrokerEventDefinitions())
        self.core.hooks.append(advertiser or Advertiser(self.base))
        self.ingestor = ingestor
        #: the definition index events are checked against; the composition root may make it
        #: first, to hand it to the pipeline whose ingestor this component is then given
        self.validator = validator if validator is not None else RegistryValidator()
        #: data schemas in other formats, compiled once per document (shared with the checks
        #: of writes, whose Protobuf compilations it reuses)
        self.compiled = CompiledSchemas(self.core.checks.formats)
        #: compile data schemas when the index is built (off the event loop), as events will
        #: be checked against them (``--event-validation`` warn or enforce)
        self.check_events = check_events
        self._routes = RegistryRoutes(self)
        #: change events that could not be ingested (logged), for operators and tests
        self.emit_failures = 0
        self._unwatch: Callable[[], None] | None = None
        self._stale = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None

    def routes(self) -> Sequence[BaseRoute]:
        """The registry's routes (only its own paths; see :mod:`cebroker.registry.routes`)."""
        return self._routes.routes()

    def openapi(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The registry's paths and schemas of the broker's OpenAPI document."""
        from cebroker.registry import openapi

        return openapi.PATHS, openapi.SCHEMAS

    async def start(self) -> None:
        """Create the registry root, advertise the broker, build the validation index, and
        follow the other instances' writes."""
        # Followed first, so that no write of another instance falls between the build and it.
        self._unwatch = self.store.watch(self._stale.set)
        self._follower = asyncio.create_task(self._follow(), name="cebroker-registry-follow")
        result = await self.store.write(lambda rows: self.core.write(rows, lambda w: None))
        self.validator.index = await self.store.read(
            lambda rows: DefinitionIndex.build(
                rows, self.base, compiled=self.compiled, warm=self.check_events
            )
        )
        await self._after_commit(result.changes, reindexed=True)

    async def stop(self) -> None:
        """Stop following other instances' writes (the storage is closed by its owner)."""
        if self._unwatch is not None:
            self._unwatch()
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    async def _follow(self) -> None:
        """Rebuild the validation index after other instances' writes, one rebuild for all the
        writes heard meanwhile; a rebuild that fails is tried again a second later."""
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                self.validator.index = await self._rebuilt(self.validator.index)
            except StorageUnavailable as exc:
                log.warning("definition index not rebuilt after another instance's write: %s", exc)
                await asyncio.sleep(REBUILD_RETRY)
                self._stale.set()

    async def _rebuilt(self, previous: DefinitionIndex | None) -> DefinitionIndex:
        return await self.store.read(
            lambda rows: DefinitionIndex.build(
                rows, self.base, previous, self.compiled, warm=self.check_events
            )
        )

    # ---- the Backend the routes use -----------------------------------------------------

    async def read(self, target: Target, opts: ReadOptions) -> Any:
        """Render ``target``."""
        return await self.store.read(lambda rows: self.core.read(rows, target, opts))

    async def read_pieces(
        self, target: Target, opts: ReadOptions, shape: Callable[[Any], Any]
    ) -> list[bytes]:
        """Render ``target``, pass it through ``shape`` and encode it as JSON pieces, all on the
        storage's thread within one read (for answers as large as the registry: see
        :mod:`cebroker.registry.jsonout`)."""
        return await self.store.read(
            lambda rows: list(jsonout.pieces(shape(self.core.read(rows, target, opts))))
        )

    async def raw(self, target: Target) -> RawDocument:
        """A document for a GET without ``$details``."""
        return await self.store.read(lambda rows: self.core.raw(rows, target))

    async def find_by_uri(self, uri: str, plural: str) -> Target:
        """Resolve a schema/message URI to a target."""
        return self.core.find_by_uri(uri, plural)

    async def materialized(self, target: Target) -> Any:
        """A message definition with its ``basemessage`` chain merged in."""
        return await self.store.read(lambda rows: self.core.materialized(rows, target))

    async def check_body(self, document: Any) -> None:
        """Validate an imported document against the configured document schema (in a thread:
        a large document takes a while)."""
        await asyncio.to_thread(self.core.check_body, document)

    async def write(
        self,
        op: Callable[[Writer], WriteResult],
        ignore: frozenset[str] = frozenset(),
        *,
        dry_run: bool = False,
    ) -> WriteResult:
        """Run one write transaction, then refresh the validator and emit the change events.
        With ``dry_run`` the transaction is rolled back after the checks (raises
        :class:`~cebroker.registry.service.DryRun` when they pass)."""
        result = await self.store.write(lambda rows: self.core.write(rows, op, ignore, dry_run=dry_run))
        await self._after_commit(result.changes)
        return result

    async def _after_commit(self, changes: ChangeLog, *, reindexed: bool = False) -> None:
        if not len(changes):
            return
        if not reindexed and (
            changes.touches("messagegroups")
            or changes.touches("schemagroups")
            or changes.touches("endpoints")
        ):
            previous = self.validator.index
            self.validator.index = await self.store.read(
                lambda rows: DefinitionIndex.build(
                    rows, self.base, previous, self.compiled, warm=self.check_events
                )
            )
        await self.emit(changes)

    async def emit(self, changes: ChangeLog) -> None:
        """Send the change events of one committed write to the ingest path."""
        if self.ingestor is None:
            return
        events = build_events(changes, self.base, changes.time or now_rfc3339())
        try:
            await self.ingestor.ingest(events)
        except (BrokerError, OSError) as exc:
            self.emit_failures += 1
            log.warning("registry change events not ingested (%d events): %s", len(events), exc)
