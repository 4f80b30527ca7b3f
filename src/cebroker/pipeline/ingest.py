"""The :class:`~cebroker.contracts.Ingestor`: validate, match once, commit, dispatch."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from cebroker.contracts import Event, EventValidator, IngestResult, ValidationMode
from cebroker.errors import FieldProblem, Overloaded, ValidationError
from cebroker.pipeline.dispatch import Dispatcher
from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.tail import TailHub
from cebroker.pipeline.validation import event_problems, normalize
from cebroker.storage.deliveries import DeliveryLog, Incoming

log = logging.getLogger("cebroker.pipeline")


class Pipeline:
    """The durable entry of events into the broker (implements ``Ingestor``).

    Args:
        max_backlog: pending deliveries above which new events are refused with 503.
        validator: optional check of events against registered definitions, applied per
            ``validation_mode``: ``enforce`` refuses violating events, ``warn`` counts and logs.
        tail: live watchers of matched events, handed every committed event.
    """

    def __init__(
        self,
        journal: DeliveryLog,
        matcher: Matcher,
        dispatcher: Dispatcher,
        metrics: PipelineMetrics,
        *,
        max_backlog: int,
        validator: EventValidator | None = None,
        validation_mode: ValidationMode = ValidationMode.OFF,
        tail: TailHub | None = None,
    ) -> None:
        self._log = journal
        self._matcher = matcher
        self._dispatcher = dispatcher
        self._metrics = metrics
        self._max_backlog = max_backlog
        self.validator = validator
        self.validation_mode = validation_mode
        self.tail = tail
        self._accepted = metrics.events_in.labels("accepted")
        self._duplicates = metrics.events_in.labels("duplicate")

    async def ingest(self, events: Sequence[Event]) -> IngestResult:
        """Validate, commit and schedule ``events`` (pointers ``/<index>/<attribute>``)."""
        return await self.accept(events, batch=True)

    async def accept(self, events: Sequence[Any], *, batch: bool) -> IngestResult:
        """Like :meth:`ingest`; ``batch=False`` names problems ``/<attribute>`` (one event)."""
        problems: list[FieldProblem] = []
        for index, event in enumerate(events):
            problems.extend(event_problems(event, f"/{index}" if batch else ""))
        if problems:
            self._metrics.events_rejected.labels("invalid").inc()
            raise ValidationError(problems)
        clean = [normalize(event) for event in events]
        self._check_definitions(clean, batch)
        if self._dispatcher.pending >= self._max_backlog:
            self._metrics.events_rejected.labels("overloaded").inc()
            raise Overloaded(
                f"{self._dispatcher.pending} deliveries are pending; retry later", retry_after=5.0, status=503
            )
        if not clean:
            return IngestResult(accepted=0, duplicates=0)
        match = self._matcher.match
        items = [Incoming(e, e["source"], e["id"], match(e)) for e in clean]
        try:
            written = await self._log.append(items)
        except TypeError as exc:  # only from ingest(): HTTP input is parsed JSON already
            raise ValidationError([FieldProblem("", f"an event is not JSON-serialisable: {exc}")]) from exc
        self._dispatcher.accept(clean, written)
        if self.tail is not None and self.tail.active:
            self.tail.publish(clean, written)
        duplicates = sum(1 for w in written if w is None)
        self._accepted.inc(len(clean) - duplicates)
        if duplicates:
            self._duplicates.inc(duplicates)
        self._metrics.matches.inc(sum(len(w.deliveries) for w in written if w is not None))
        return IngestResult(accepted=len(clean), duplicates=duplicates)

    def _check_definitions(self, events: list[dict[str, Any]], batch: bool) -> None:
        if self.validator is None or self.validation_mode is ValidationMode.OFF:
            return
        problems: list[FieldProblem] = []
        for index, event in enumerate(events):
            prefix = f"/{index}" if batch else ""
            for violation in self.validator.validate(event):
                problems.append(FieldProblem(prefix + violation.pointer, violation.message))
        if not problems:
            return
        if self.validation_mode is ValidationMode.ENFORCE:
            self._metrics.events_rejected.labels("definition").inc()
            raise ValidationError(problems)
        offenders = len({p.pointer.split("/")[1] for p in problems}) if batch else 1
        self._metrics.validation_warnings.inc(offenders)
        log.warning(
            "events differ from their definitions: %s",
            "; ".join(f"{p.pointer}: {p.message}" for p in problems),
        )
