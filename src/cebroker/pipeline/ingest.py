"""The :class:`~cebroker.contracts.Ingestor`: validate, match once, commit, dispatch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ceprotocols.tracecontext import TraceContext

from cebroker.broker_events import RESERVED
from cebroker.contracts import Event, EventValidator, IngestResult, ValidationMode
from cebroker.errors import FieldProblem, Forbidden, Overloaded, ValidationError
from cebroker.pipeline.brokerevents import is_reserved
from cebroker.pipeline.dispatch import Dispatcher
from cebroker.pipeline.dispatch.replies import IN_REPLY_TO
from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.ordering import partition_key
from cebroker.pipeline.requestreply import ReplyWaiters
from cebroker.pipeline.tail import TailHub
from cebroker.pipeline.wellformed import event_problems, normalize
from cebroker.storage.errors import IndexBehind
from cebroker.storage.ingest import Appended, Incoming, Ingest
from cebroker.storage.subscriptions import SubscriptionStore
from cebroker.telemetry import NO_TRACING, Tracing
from cebroker.telemetry.tracing import stored_context

log = logging.getLogger("cebroker.pipeline")

#: Times an ingest catches up with subscription changes and matches again before it gives up
#: (503): each round only waits for changes that committed while it was matching.
CATCH_UP_ROUNDS = 5

#: Events checked or matched between two pauses for the event loop (a few milliseconds of work).
SLICE = 1000


async def release(*lists: list[Any]) -> None:
    """Empty ``lists`` a slice at a time, yielding in between: freeing the objects of a large
    batch all at once would hold the interpreter for as long as it takes."""
    for items in lists:
        while items:
            del items[-SLICE:]
            if items:
                await asyncio.sleep(0)


class EventIngestor:
    """The durable entry of events into the broker (implements ``Ingestor``).

    Args:
        max_backlog: pending deliveries above which new events are refused with 503.
        validator: optional check of events against registered definitions, applied per
            ``validation_mode``: ``enforce`` refuses violating events, ``warn`` counts and logs.
        tail: live watchers of matched events, handed every committed event.
    """

    def __init__(
        self,
        journal: Ingest,
        store: SubscriptionStore,
        matcher: Matcher,
        dispatcher: Dispatcher,
        metrics: PipelineMetrics,
        *,
        max_backlog: int,
        validator: EventValidator | None = None,
        validation_mode: ValidationMode = ValidationMode.OFF,
        tail: TailHub | None = None,
        tracing: Tracing = NO_TRACING,
        waiters: ReplyWaiters | None = None,
    ) -> None:
        self._tracing = tracing
        #: Requests waiting for replies; every committed reply is announced to them.
        self.waiters = waiters
        self._log = journal
        self._store = store
        self._matcher = matcher
        self._dispatcher = dispatcher
        self._metrics = metrics
        self._max_backlog = max_backlog
        self.validator = validator
        self.validation_mode = validation_mode
        self.tail = tail
        self._accepted = metrics.events_in.labels("accepted")
        self._duplicates = metrics.events_in.labels("duplicate")
        #: One future per ingest being matched or written, done once its append has returned.
        self._matching: set[asyncio.Future[None]] = set()

    @property
    def traced(self) -> bool:
        """Whether accepted events get publish spans (telemetry is on)."""
        return self._tracing.enabled

    async def matched(self) -> None:
        """Return once every ingest that had started matching when this was called has been
        written (or refused): after a subscription change, nothing matched without it is still
        on its way to the log (a start replay's boundary, :mod:`.replays.starts`)."""
        waiting = list(self._matching)
        if waiting:
            await asyncio.wait(waiting)

    async def ingest(
        self, events: Sequence[Event], traces: Sequence[TraceContext | None] = ()
    ) -> IngestResult:
        """Validate, commit and schedule ``events`` (pointers ``/<index>/<attribute>``); see
        :class:`~cebroker.contracts.Ingestor` for ``traces``."""
        return await self.accept(events, batch=True, carried=traces)

    async def accept(
        self,
        events: Sequence[Any],
        *,
        batch: bool,
        permit: Callable[[dict[str, Any]], bool] | None = None,
        transport: TraceContext | None = None,
        protocol: str | None = None,
        tenant: str | None = None,
        carried: Sequence[TraceContext | None] = (),
        own: bool = False,
    ) -> IngestResult:
        """Like :meth:`ingest`; ``batch=False`` names problems ``/<attribute>`` (one event).

        ``tenant`` is the publisher's tenant (None: none): events are de-duplicated per
        publishing tenant (:class:`~cebroker.storage.deliveries.Incoming`).

        A large batch is checked and matched in slices of :data:`SLICE` events with a pause for
        the event loop in between, so that other requests are served meanwhile. ``permit`` is the
        publisher's publish policy: an event it refuses makes the whole request a 403 naming that
        event, before anything is written. Types beginning ``dev.cebroker.`` are the broker's
        own (``own``): anyone else's is refused the same way (403). With tracing on, every event
        accepted gets a publish span, child of its own ``traceparent`` attribute, else of the
        context its message ``carried`` (per event, protocol sources), else of ``transport``
        (the request's context), over ``protocol`` (``http``, ...).
        """
        problems: list[FieldProblem] = []
        clean: list[dict[str, Any]] = []
        for start in range(0, len(events), SLICE):
            if start:
                await asyncio.sleep(0)
            for index in range(start, min(start + SLICE, len(events))):
                found = event_problems(events[index], f"/{index}" if batch else "")
                if found:
                    problems.extend(found)
                elif not problems:
                    clean.append(normalize(events[index]))
        if problems:
            self._metrics.events_rejected.labels("invalid").inc()
            raise ValidationError(problems)
        refusal = self._refusal(clean, batch=batch, permit=permit, own=own)
        if refusal is not None:
            label, error = refusal
            self._metrics.events_rejected.labels(label).inc()
            raise error
        await self._check_definitions(clean, batch)
        if self._overloaded:
            self._metrics.events_rejected.labels("overloaded").inc()
            raise Overloaded(
                f"{self._dispatcher.pending} deliveries are pending; retry later", retry_after=5.0, status=503
            )
        if not clean:
            return IngestResult(accepted=0, duplicates=0)
        duplicated = await self.commit_each(
            clean, tenant=tenant, transport=transport, protocol=protocol, carried=carried
        )
        return IngestResult(accepted=len(duplicated), duplicates=sum(duplicated))

    def admitted(
        self, events: Sequence[Any], *, permit: Callable[[dict[str, Any]], bool] | None = None
    ) -> list[dict[str, Any]] | None:
        """The few ``events`` of one request as :meth:`accept` would commit them (checked and
        normalized), or None when it would refuse them or check them against definitions; for
        a caller that then commits them with :meth:`commit_each`, or else calls :meth:`accept` to be
        refused with its error. Nothing is counted or logged here."""
        if self.validator is not None and self.validation_mode is not ValidationMode.OFF:
            return None
        if self._overloaded:
            return None
        clean: list[dict[str, Any]] = []
        for event in events:
            if event_problems(event, ""):
                return None
            clean.append(normalize(event))
        if not clean or self._refusal(clean, batch=False, permit=permit, own=False) is not None:
            return None
        return clean

    @property
    def _overloaded(self) -> bool:
        """Whether the pending deliveries have reached the backlog bound (new events: 503)."""
        return self._dispatcher.pending >= self._max_backlog

    def _refusal(
        self,
        clean: list[dict[str, Any]],
        *,
        batch: bool,
        permit: Callable[[dict[str, Any]], bool] | None,
        own: bool,
    ) -> tuple[str, Forbidden] | None:
        """Why ``clean`` may not be published (the label of its count and the error), or None:
        a reserved type from anyone but the broker, or an event the publish policy refuses."""
        if not own:
            for index, event in enumerate(clean):
                if is_reserved(event):
                    where = f"event /{index}" if batch else "the event"
                    return "reserved", Forbidden(
                        f"{where} (type {str(event['type'])[:200]!r}) may not be published: types"
                        f" beginning {RESERVED!r} are the broker's own events"
                    )
        if permit is not None:
            for index, event in enumerate(clean):
                if not permit(event):
                    where = f"event /{index}" if batch else "the event"
                    return "policy", Forbidden(
                        f"{where} (source {str(event['source'])[:200]!r}, id {str(event['id'])[:200]!r})"
                        " may not be published: the tenant's publish policy refuses it"
                    )
        return None

    async def commit_each(
        self,
        clean: list[dict[str, Any]],
        *,
        tenant: str | None,
        transport: TraceContext | None = None,
        protocol: str | None = None,
        carried: Sequence[TraceContext | None] = (),
        durable: Callable[[list[bool]], None] | None = None,
    ) -> list[bool]:
        """Match, commit and schedule events already checked and normalized (by :meth:`accept`
        or :meth:`admitted`), the rest as :meth:`accept`; per event, whether it was a duplicate
        (``clean`` is emptied).

        ``durable`` is called with the same list as soon as the events are committed, before
        they are handed to the dispatcher (which the log does not need: it is the record), so
        that a caller answers its client without waiting for that.
        """
        traces: list[str | None] | None = None
        committed: Callable[[list[Appended | None]], None] | None = None
        if durable is not None:
            answer = durable

            def committed(written: list[Appended | None]) -> None:
                # Called by the log as soon as the events are committed (see Ingest.append).
                answer([w is None for w in written])

        if self._tracing.enabled:
            written, traces = await self._traced_append(
                clean, tenant or "", transport, protocol, carried, committed
            )
        else:
            written = await self._append(clean, tenant or "", durable=committed)
        duplicated = [w is None for w in written]
        duplicates = sum(duplicated)
        matches = 0
        replies: list[dict[str, Any]] = []
        for start in range(0, len(clean), SLICE):
            if start:
                await asyncio.sleep(0)
            events, done = clean[start : start + SLICE], written[start : start + SLICE]
            their_traces = None if traces is None else traces[start : start + SLICE]
            try:
                self._dispatcher.accept(events, done, their_traces)
            except Exception:
                # Committed (and perhaps answered already): the log is the record, so their
                # subscriptions load the deliveries from it instead.
                log.exception("committed events could not be handed to the dispatcher")
                self._dispatcher.unhanded([pair for w in done if w is not None for pair in w.deliveries])
            if self.tail is not None and self.tail.active:
                self.tail.publish(events, done, their_traces)
            if self.waiters is not None:
                replies.extend(
                    e for e, w in zip(events, done, strict=True) if w is not None and IN_REPLY_TO in e
                )
            matches += sum(len(w.deliveries) for w in done if w is not None)
        self._accepted.inc(len(clean) - duplicates)
        if duplicates:
            self._duplicates.inc(duplicates)
        self._metrics.matches.inc(matches)
        if replies and self.waiters is not None:
            await self.waiters.announce(replies)
        await release(written, clean)
        return duplicated

    async def _traced_append(
        self,
        clean: list[dict[str, Any]],
        tenant: str,
        transport: TraceContext | None,
        protocol: str | None,
        carried: Sequence[TraceContext | None],
        durable: Callable[[list[Appended | None]], None] | None,
    ) -> tuple[list[Appended | None], list[str | None]]:
        """:meth:`_append` with a publish span per event and a match span over them; each
        event's trace context goes into the log with it."""
        spans = self._tracing.publish(clean, transport, protocol=protocol, carried=carried)
        traces: list[str | None] = [stored_context(span) for span in spans]
        match = self._tracing.match(spans)
        try:
            written = await self._append(clean, tenant, traces, durable=durable)
        except BaseException as exc:
            Tracing.published(spans, None, exc)
            match.end()
            raise
        match.set_attribute(
            "cebroker.match.deliveries", sum(len(w.deliveries) for w in written if w is not None)
        )
        match.end()
        Tracing.published(spans, [w is None for w in written], None)
        return written, traces

    async def _append(
        self,
        clean: list[dict[str, Any]],
        tenant: str,
        traces: list[str | None] | None = None,
        *,
        durable: Callable[[list[Appended | None]], None] | None = None,
    ) -> list[Appended | None]:
        """Match and commit; when a shared log finds the index behind a subscription change made
        by another instance, catch up and match again, so no event is matched against a stale
        index. ``durable``: as :meth:`~cebroker.storage.ingest.Ingest.append`'s."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._matching.add(done)
        try:
            return await self._match_and_append(clean, tenant, traces, durable)
        finally:
            self._matching.discard(done)
            done.set_result(None)

    async def _match_and_append(
        self,
        clean: list[dict[str, Any]],
        tenant: str,
        traces: list[str | None] | None,
        durable: Callable[[list[Appended | None]], None] | None,
    ) -> list[Appended | None]:
        for attempt in range(CATCH_UP_ROUNDS):
            # Read before matching. Matching a large batch pauses for the event loop between
            # slices: a change that lands meanwhile makes the log refuse this version
            # (IndexBehind), and the events are matched again.
            version = self._store.version
            items: list[Incoming] = []
            for start in range(0, len(clean), SLICE):
                if start:
                    await asyncio.sleep(0)
                if traces is None:
                    items.extend(self._incoming(e, tenant) for e in clean[start : start + SLICE])
                else:
                    items.extend(
                        self._incoming(e, tenant, t)
                        for e, t in zip(
                            clean[start : start + SLICE], traces[start : start + SLICE], strict=True
                        )
                    )
            try:
                written = await self._log.append(items, version=version, durable=durable)
            except TypeError as exc:  # only from ingest(): HTTP input is parsed JSON already
                problem = FieldProblem("", f"an event is not JSON-serialisable: {exc}")
                raise ValidationError([problem]) from exc
            except IndexBehind:
                if attempt == CATCH_UP_ROUNDS - 1:
                    raise
                await self._store.catch_up()
                continue
            await release(items)
            return written
        raise AssertionError("unreachable")  # the last round returns or raises

    def _incoming(self, event: dict[str, Any], tenant: str, trace: str | None = None) -> Incoming:
        """The event, matched, with the ordering groups of its ordered subscriptions, published
        by ``tenant`` (and its trace context, when traced)."""
        matched = self._matcher.match(event)
        ordered = self._matcher.ordered
        if ordered and not ordered.isdisjoint(matched):
            key = partition_key(event)
            if key is not None:
                groups = tuple(key if sub in ordered else None for sub in matched)
                return Incoming(event, event["source"], event["id"], matched, groups, tenant, trace)
        return Incoming(event, event["source"], event["id"], matched, tenant=tenant, trace=trace)

    async def _check_definitions(self, events: list[dict[str, Any]], batch: bool) -> None:
        if self.validator is None or self.validation_mode is ValidationMode.OFF:
            return
        problems: list[FieldProblem] = []
        for index, event in enumerate(events):
            if index and not index % SLICE:
                await asyncio.sleep(0)
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
