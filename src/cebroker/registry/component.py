"""The registry as a :class:`cebroker.app.Component`: store thread, routes, change events, validator.

All database work runs on one dedicated thread (the store's connection lives there). After a
write commits, the definition index behind :attr:`RegistryComponent.validator` is rebuilt on
that thread and the write's change events go to the broker's :class:`Ingestor`. The write has
already committed by then, so a failed ingest is logged, not undone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from starlette.routing import BaseRoute

from cebroker.errors import BrokerError
from cebroker.pipeline.contracts import Ingestor
from cebroker.registry.advertise import Advertiser
from cebroker.registry.changes import ChangeLog, build_events
from cebroker.registry.documents import DocumentSchema
from cebroker.registry.entities import now_rfc3339
from cebroker.registry.paths import Target
from cebroker.registry.routes import RegistryRoutes
from cebroker.registry.service import RawDocument, ReadOptions, RegistryCore, WriteResult
from cebroker.registry.store import RegistryStore
from cebroker.registry.validation import DefinitionIndex, RegistryValidator
from cebroker.registry.writes import Writer

log = logging.getLogger("cebroker.registry")
T = TypeVar("T")


class RegistryComponent:
    """Serves the xRegistry and announces its changes; see the module docstring."""

    def __init__(
        self,
        db: Path,
        base_url: str,
        *,
        ingestor: Ingestor | None = None,
        document_schema: Path | None = None,
        advertiser: Advertiser | None = None,
    ) -> None:
        self.base = base_url.rstrip("/")
        self.core = RegistryCore(
            RegistryStore(db), self.base, DocumentSchema(document_schema) if document_schema else None
        )
        self.core.hooks.append(advertiser or Advertiser(self.base))
        self.ingestor = ingestor
        self.validator = RegistryValidator()
        self._executor: ThreadPoolExecutor | None = None
        self._routes = RegistryRoutes(self)
        #: change events that could not be ingested (logged), for operators and tests
        self.emit_failures = 0

    def routes(self) -> Sequence[BaseRoute]:
        """The registry's routes (only its own paths; see :mod:`cebroker.registry.routes`)."""
        return self._routes.routes()

    async def start(self) -> None:
        """Open the store on its thread, advertise the broker, build the validation index."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="registry")
        changes = await self._run(self.core.open)
        await self._after_commit(changes)

    async def stop(self) -> None:
        """Close the store and its thread."""
        if self._executor is None:
            return
        await self._run(self.core.close)
        self._executor.shutdown(wait=True)
        self._executor = None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            raise RuntimeError("the registry is not started")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # ---- the Backend the routes use -----------------------------------------------------

    async def read(self, target: Target, opts: ReadOptions) -> Any:
        """Render ``target``."""
        return await self._run(self.core.read, target, opts)

    async def raw(self, target: Target) -> RawDocument:
        """A document for a GET without ``$details``."""
        return await self._run(self.core.raw, target)

    async def find_by_uri(self, uri: str, plural: str) -> Target:
        """Resolve a schema/message URI to a target."""
        return await self._run(self.core.find_by_uri, uri, plural)

    async def materialized(self, target: Target) -> Any:
        """A message definition with its ``basemessage`` chain merged in."""
        return await self._run(self.core.materialized, target)

    async def check_body(self, document: Any) -> None:
        """Validate an imported document against the configured document schema."""
        await self._run(self.core.check_body, document)

    async def write(
        self, op: Callable[[Writer], WriteResult], ignore: frozenset[str] = frozenset()
    ) -> WriteResult:
        """Run one write transaction, then refresh the validator and emit the change events."""
        result = await self._run(self.core.write, op, ignore)
        await self._after_commit(result.changes)
        return result

    async def _after_commit(self, changes: ChangeLog) -> None:
        if not len(changes):
            return
        if (
            changes.touches("messagegroups")
            or changes.touches("schemagroups")
            or changes.touches("endpoints")
        ):
            self.validator.index = await self._run(
                DefinitionIndex.build, self.core.store, self.base, self.validator.index
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
