"""The ingress sources component: one ceprotocols receiver per ``--source`` URL, feeding the
pipeline's :class:`~cebroker.contracts.Ingestor`.

A receiver acknowledges a message upstream only after ``on_events`` returned, and ``on_events``
returns only once :meth:`Ingestor.ingest` committed the events durably, so an upstream ack always
means "stored" (the same promise as a 202 on ``POST /events``). Events the ingestor refuses as
invalid are reported to the receiver as such (it counts, keeps and rejects them); an overloaded
or failing store makes the receiver hand the same events over again later.

Each source has a name (see :func:`source_names`): it labels the source's metrics and log lines
(a URL may carry credentials) and addresses its refused messages, ``GET /sources/{name}/rejects``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ceprotocols.errors import BindingError, SettingsError
from ceprotocols.receiver import Limits, Receiver
from ceprotocols.sources import create_receiver
from ceprotocols.tracecontext import TraceContext
from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute

from cebroker.contracts import BrokerEventEmitter, Ingestor
from cebroker.errors import Overloaded, ValidationError
from cebroker.sources.metrics import SourcesCollector
from cebroker.sources.quarantine import MemoryRejects, Rejects, quarantine

log = logging.getLogger("cebroker.sources")

#: Pause before a receiver that stopped unexpectedly is started again.
RESTART_PAUSE = 1.0
#: A subscribed receiver that has not polled its source for this long is stalled.
STALLED_AFTER = 30.0
#: ``/readyz`` reports a source that has not been consuming for this long.
DOWN_AFTER = 60.0
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def source_names(urls: Sequence[str]) -> list[str]:
    """The name of each source: its ``?name=`` query parameter, else ``<scheme>-<position>``
    (``mqtt-1``, ``kafka-2``: the position among the sources, from 1). SettingsError for a name
    that is not 1-63 lower-case letters, digits, ``-`` and ``_``, or that two sources share."""
    names: list[str] = []
    for position, url in enumerate(urls, start=1):
        parts = urlsplit(url, allow_fragments=False)
        given = [value for key, value in parse_qsl(parts.query, keep_blank_values=True) if key == "name"]
        name = given[-1] if given else f"{parts.scheme.lower()}-{position}"
        if not _NAME.fullmatch(name):
            raise SettingsError("source", f"source {position}: name must be 1-63 of a-z, 0-9, '-' and '_'")
        if name in names:
            raise SettingsError("source", f"source {position}: the name {name!r} is already taken")
        names.append(name)
    return names


@dataclass(eq=False)
class Source:
    """One configured source: its receiver, its refused messages and its health."""

    name: str
    receiver: Receiver
    rejects: Rejects = field(default_factory=MemoryRejects)
    restarts: int = 0
    #: ``time.monotonic()`` since when the source has not been consuming (None: it is).
    down_since: float | None = field(default_factory=time.monotonic)

    def consuming(self, now: float) -> bool:
        """Subscribed, and polling its source (not stalled)."""
        stats = self.receiver.stats
        return stats.subscribed and now - stats.alive_at < STALLED_AFTER

    def observe(self, now: float) -> bool:
        """Update ``down_since``; returns whether the source is consuming."""
        up = self.consuming(now)
        if up:
            self.down_since = None
        elif self.down_since is None:
            self.down_since = now
        return up


class SourcesComponent:
    """Runs a receiver per source URL for the broker's lifetime."""

    def __init__(
        self,
        urls: Sequence[str],
        ingestor: Ingestor,
        *,
        receiver_factory: Callable[[str, Limits], Receiver] = create_receiver,
        metrics: CollectorRegistry | None = None,
        limits: Limits | None = None,
        down_after: float = DOWN_AFTER,
        broker_events: BrokerEventEmitter | None = None,
    ) -> None:
        self.urls = list(urls)
        self._events = broker_events
        self.names = source_names(self.urls)
        self._ingestor = ingestor
        self._factory = receiver_factory
        self._limits = limits or Limits()
        self._down_after = down_after
        self.sources: list[Source] = []
        self._tasks: list[asyncio.Task[None]] = []
        if metrics is not None:
            metrics.register(SourcesCollector(self.health))

    @property
    def receivers(self) -> list[Receiver]:
        """The receivers, in the order of the URLs."""
        return [source.receiver for source in self.sources]

    def source(self, name: str) -> Source | None:
        """The source called ``name``."""
        return next((s for s in self.sources if s.name == name), None)

    def openapi(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The sources' paths and schemas of the broker's OpenAPI document."""
        from cebroker.sources import openapi

        return openapi.PATHS, openapi.SCHEMAS

    def routes(self) -> Sequence[BaseRoute]:
        """``GET /sources`` and ``GET /sources/{name}/rejects``."""
        from cebroker.sources.routes import SourcesApi

        return SourcesApi(self).routes()

    async def start(self) -> None:
        """Create every receiver (a bad URL fails the start, naming it) and start consuming."""
        self.sources = [
            Source(name, self._factory(url, self._limits))
            for name, url in zip(self.names, self.urls, strict=True)
        ]
        for source in self.sources:
            self._tasks.append(asyncio.create_task(self._supervise(source), name=f"source {source.name}"))
            log.info("consuming events from source %s (%s)", source.name, source.receiver.source)

    async def stop(self) -> None:
        """Stop every receiver; unacknowledged messages stay with the upstream broker."""
        for source in self.sources:
            with contextlib.suppress(Exception):
                await source.receiver.aclose()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def health(self) -> list[tuple[Source, bool]]:
        """Each source and whether it is consuming right now."""
        now = time.monotonic()
        return [(source, source.observe(now)) for source in self.sources]

    def readiness(self) -> list[str]:
        """The sources that have not been consuming for longer than the threshold (for ``/readyz``)."""
        now = time.monotonic()
        problems = []
        for source, _up in self.health():
            if source.down_since is not None and now - source.down_since > self._down_after:
                problems.append(
                    f"source {source.name} has not been consuming for {now - source.down_since:.0f} s"
                )
        return problems

    async def _ingest(self, events: list[dict[str, Any]], traces: Sequence[TraceContext | None]) -> None:
        try:
            await self._ingestor.ingest(events, traces)
        except ValidationError as exc:
            raise BindingError(exc.detail) from exc
        except (Overloaded, OSError, sqlite3.Error):
            raise  # transient: the receiver hands the same events over again later
        except Exception as exc:
            # Not a failure of the store: something in these events made ingest fail. Refused like
            # an invalid event, so that one event cannot block its source for good.
            log.error("ingest failed unexpectedly (%s: %s); the events are refused", type(exc).__name__, exc)
            log.debug("ingest failure", exc_info=True)
            raise BindingError(f"the broker failed to ingest this event ({type(exc).__name__})") from exc

    async def _supervise(self, source: Source) -> None:
        # A receiver handles bad messages and connection failures itself; this guards against a
        # bug ending ingress from a source for good. Restarts are counted and the source reports
        # not subscribed while it is down.
        receiver = source.receiver
        on_reject = quarantine(source.name, source.rejects, self._events, asyncio.get_running_loop())
        while True:
            try:
                await receiver.run(self._ingest, on_reject)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                source.restarts += 1
                receiver.stats.subscribed = False
                log.error(
                    "source %s stopped unexpectedly (%s); restarting in %.0f s",
                    source.name,
                    type(exc).__name__,
                    RESTART_PAUSE,
                )
                log.debug("source %s stopped", source.name, exc_info=True)
                await asyncio.sleep(RESTART_PAUSE)
