"""The ingress sources component: one ceprotocols receiver per ``--source`` URL, feeding the
pipeline's :class:`~cebroker.contracts.Ingestor`.

A receiver acknowledges a message upstream only after ``on_events`` returned, and ``on_events``
returns only once :meth:`Ingestor.ingest` committed the events durably, so an upstream ack always
means "stored" (the same promise as a 202 on ``POST /events``). Events the ingestor refuses as
invalid are reported to the receiver as such (it counts, logs and rejects them); an overloaded
or failing ingestor makes the receiver hand the same events over again later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ceprotocols.errors import BindingError
from ceprotocols.receiver import Receiver
from ceprotocols.sources import create_receiver
from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute

from cebroker.contracts import Ingestor
from cebroker.errors import ValidationError
from cebroker.sources.metrics import SourcesCollector

log = logging.getLogger("cebroker.sources")

#: Pause before a receiver that stopped unexpectedly is started again.
RESTART_PAUSE = 1.0


class SourcesComponent:
    """Runs a receiver per source URL for the broker's lifetime."""

    def __init__(
        self,
        urls: Sequence[str],
        ingestor: Ingestor,
        *,
        receiver_factory: Callable[[str], Receiver] = create_receiver,
        metrics: CollectorRegistry | None = None,
    ) -> None:
        self.urls = list(urls)
        self._ingestor = ingestor
        self._factory = receiver_factory
        self.receivers: list[Receiver] = []
        self._tasks: list[asyncio.Task[None]] = []
        if metrics is not None:
            metrics.register(SourcesCollector(lambda: self.receivers))

    def routes(self) -> Sequence[BaseRoute]:
        """Sources serve no HTTP routes."""
        return []

    async def start(self) -> None:
        """Create every receiver (a bad URL fails the start, naming it) and start consuming."""
        self.receivers = [self._factory(url) for url in self.urls]
        for receiver in self.receivers:
            self._tasks.append(
                asyncio.create_task(self._supervise(receiver), name=f"source {receiver.source}")
            )
            log.info("consuming events from %s", receiver.source)

    async def stop(self) -> None:
        """Stop every receiver; unacknowledged messages stay with the upstream broker."""
        for receiver in self.receivers:
            with contextlib.suppress(Exception):
                await receiver.aclose()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _ingest(self, events: list[dict[str, Any]]) -> None:
        try:
            await self._ingestor.ingest(events)
        except ValidationError as exc:
            raise BindingError(exc.detail) from exc

    async def _supervise(self, receiver: Receiver) -> None:
        # A receiver handles its own connection failures; this only guards against a bug or an
        # unexpected exception ending ingress from a source for good.
        while True:
            try:
                await receiver.run(self._ingest)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("source %s stopped unexpectedly; restarting", receiver.source)
                await asyncio.sleep(RESTART_PAUSE)
