"""Replays of the archive over HTTP.

* ``POST /subscriptions/{id}/replay`` with ``{"from", "to", "filter", "dryrun"}``: the archived
  events accepted in ``[from, to)`` that the subscription matches (and ``filter`` too, if given)
  are delivered again through its normal path. ``dryrun`` answers ``200 {"events": N}`` and
  delivers nothing (for a subscription with a transformation it adds ``transformed``: the
  outcomes of the first :data:`PREVIEWS` events, as explain shows them); otherwise
  ``202 {"replay": id, "events": N}`` with ``Location``.
* ``GET /subscriptions/{id}/replays``: the subscription's replays, oldest first.
* ``GET /subscriptions/{id}/replays/{replay}``: one replay and its progress.
* ``DELETE /subscriptions/{id}/replays/{replay}``: cancel it.

Replays still scanning the archive (each reads its whole range) are capped per subscription and
per tenant (``--max-replays-per-subscription``, ``--max-replays-per-tenant``): one more is a 429
with ``Retry-After``, and nothing is created. Dry runs are not counted: they scan within their
own request.

Every route first resolves the subscription with the same lookup as the other per-subscription
routes (``lookup``), so they answer 404 alike and inherit its checks. ``from`` older than what
the archive holds is a 400 naming ``/from`` and the oldest event held. The matching count reads
the range a page at a time, never all of it at once.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cefilters
import orjson
from cefilters import BudgetObserver
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.clock import Clock
from cebroker.errors import FieldProblem, NotFound, TooManyReplays, ValidationError
from cebroker.options.units import format_duration
from cebroker.pipeline.dispatch import Dispatcher
from cebroker.pipeline.dispatch.lane import REPLAY_ATTRIBUTE
from cebroker.pipeline.replays.matching import ReplayFilter
from cebroker.pipeline.replays.replayer import Replayer
from cebroker.pipeline.replays.starts import UNBOUNDED
from cebroker.pipeline.routes.overview import timestamp
from cebroker.pipeline.transform import OutputCheck, compile_of
from cebroker.pipeline.transform.preview import preview
from cebroker.storage.archive import EventArchive, Replay, ReplayRequest
from cebroker.subscription import Subscription
from cebroker.subscription_settings.delivery import instant
from cebroker.web.body import read_json

#: Resolves the subscription of a per-subscription request (NotFound if there is none for it).
Lookup = Callable[[Request], Awaitable[str]]
#: The members of a replay request.
MEMBERS = ("from", "to", "filter", "dryrun")
#: Largest replay request body.
MAX_BODY = 64 * 1024
#: Archived events read per page while counting.
PAGE = 1000
#: Events whose transformation a dry run shows.
PREVIEWS = 5
#: Seconds: the precision of the times the API shows.
TIME_RESOLUTION = 0.001
#: Seconds a caller over a replay cap is asked to wait.
CAP_RETRY_AFTER = 10.0


@dataclass(frozen=True, slots=True)
class ReplayCaps:
    """How many replays may scan the archive at once, per subscription and per tenant (the
    replays of subscriptions without a tenant count together)."""

    per_subscription: int = 2
    per_tenant: int = 8


def replay_json(replay: Replay) -> dict[str, Any]:
    """A replay as the API shows it."""
    return {
        "id": replay.id,
        "subscription": replay.subscription,
        "state": replay.state,
        "from": timestamp(replay.since) if replay.since > 0 else None,
        "to": timestamp(replay.created if replay.until >= UNBOUNDED else replay.until),
        "filter": orjson.loads(replay.filter) if replay.filter is not None else None,
        "events": replay.events,
        "matched": replay.queued,
        "delivered": replay.delivered,
        "failed": replay.failed,
        "deadlettered": replay.deadlettered,
        "pending": replay.pending,
        "removed": replay.removed,
        "createdAt": timestamp(replay.created),
    }


def _filter(value: Any) -> dict[str, Any]:
    """The extra filter, checked as the Subscriptions API checks each filter of a subscription."""
    if not isinstance(value, dict):
        raise ValidationError([FieldProblem("/filter", "must be one filter expression (an object)")])
    try:
        cefilters.compile([value])
    except cefilters.FilterError as exc:
        raise ValidationError([FieldProblem("/filter" + exc.path.removeprefix("/0"), exc.message)]) from exc
    except RecursionError as exc:
        raise ValidationError([FieldProblem("/filter", "is nested too deeply")]) from exc
    return value


def _time(body: dict[str, Any], name: str, problems: list[FieldProblem]) -> float | None:
    value = body.get(name)
    if name not in body:
        return None
    if isinstance(value, str):
        try:
            moment = instant(value)
        except ValueError:
            pass
        else:
            if math.isfinite(moment):
                return moment
    problems.append(FieldProblem(f"/{name}", "must be an RFC 3339 timestamp"))
    return None


class ReplaysApi:
    """The replay routes; ``subscriptions`` is the live view of subscriptions."""

    def __init__(
        self,
        lookup: Lookup,
        archive: EventArchive,
        subscriptions: Mapping[str, Subscription],
        dispatcher: Dispatcher,
        replayer: Replayer,
        *,
        base_url: str,
        clock: Clock,
        receive: Callable[[Subscription], Mapping[str, Any] | None] = lambda subscription: None,
        caps: ReplayCaps = ReplayCaps(),
        check: OutputCheck | None = None,
        observer: BudgetObserver | None = None,
    ) -> None:
        self._caps = caps
        # The cap is checked and the replay created under this lock, so that concurrent
        # requests to this instance cannot both take the last place.
        self._creating = asyncio.Lock()
        self._clock = clock
        self._check = check
        self._observer = observer
        self._receive = receive
        self._lookup = lookup
        self._archive = archive
        self._subscriptions = subscriptions
        self._dispatcher = dispatcher
        self._replayer = replayer
        self._base = base_url

    def routes(self) -> Sequence[BaseRoute]:
        """The four routes under ``/subscriptions/{id}/``."""
        return [
            Route("/subscriptions/{id}/replay", self.create, methods=["POST"]),
            Route("/subscriptions/{id}/replays", self.listing, methods=["GET"]),
            Route("/subscriptions/{id}/replays/{replay}", self.one, methods=["GET", "DELETE"]),
        ]

    async def create(self, request: Request) -> Response:
        """Count, and unless it is a dry run, start a replay."""
        subscription_id = await self._lookup(request)
        body = await read_json(request, limit=MAX_BODY, accepted=("application/json",))
        if not isinstance(body, dict):
            expected = "expected an object with 'from' (and 'to', 'filter', 'dryrun')"
            raise ValidationError([FieldProblem("", expected)])
        problems = [
            FieldProblem(f"/{name[:64]}", f"unknown member; expected one of {', '.join(MEMBERS)}")
            for name in body
            if name not in MEMBERS
        ]
        if "from" not in body:
            problems.append(FieldProblem("/from", "is required"))
        since = _time(body, "from", problems)
        # "to" may be null (the same as leaving it out: up to now); "from" may not.
        until = _time(body, "to", problems) if body.get("to") is not None else None
        dryrun = body.get("dryrun", False)
        if not isinstance(dryrun, bool):
            problems.append(FieldProblem("/dryrun", "must be true or false"))
        if problems:
            raise ValidationError(problems)
        assert since is not None  # "from" is required and was checked
        now = self._clock.now()
        end = min(until, now) if until is not None else now
        if until is not None and until <= since:
            raise ValidationError([FieldProblem("/to", "must be later than 'from'")])
        extra = _filter(body["filter"]) if body.get("filter") is not None else None
        await self._held(since)
        subscription = self._subscriptions.get(subscription_id)
        if subscription is None:  # deleted meanwhile
            raise NotFound(f"no subscription {subscription_id[:64]!r}")
        replay_id = str(uuid.uuid4())
        chosen = ReplayFilter(
            subscription, replay_id, extra, receive=self._receive(subscription), observer=self._observer
        )
        events = await self._count(chosen, since, end)
        if dryrun:
            answer: dict[str, Any] = {"events": events}
            if compile_of(subscription) is not None:
                first = await self._first(chosen, since, end)
                answer["transformed"] = [
                    preview(subscription, {**event, REPLAY_ATTRIBUTE: replay_id}, self._check)
                    for event in first
                ]
            return JSONResponse(answer)
        request_ = ReplayRequest(
            id=replay_id,
            subscription=subscription_id,
            since=since,
            until=end,
            filter=orjson.dumps(extra).decode() if extra is not None else None,
            events=events,
        )
        async with self._creating:
            await self._check_caps(subscription)
            replay = await self._archive.create_replay(request_)
        self._replayer.started(replay)
        if self._dispatcher.broker_events is not None:
            self._dispatcher.broker_events.emit(
                "replay.started",
                {"subscription": subscription_id, "replay": replay.id, "events": events},
                tenant=subscription.tenant,
                key=replay.id,
            )
        location = f"{self._base}/subscriptions/{subscription_id}/replays/{replay.id}"
        started = {"replay": replay.id, "events": events}
        return JSONResponse(started, status_code=202, headers={"Location": location})

    async def listing(self, request: Request) -> Response:
        """The subscription's replays, oldest first."""
        subscription_id = await self._lookup(request)
        replays = await self._archive.replays(subscription_id)
        items = [replay_json(r) for r in replays]
        return JSONResponse({"items": items}, headers={"Cache-Control": "no-store"})

    async def one(self, request: Request) -> Response:
        """``GET``: one replay; ``DELETE``: cancel it."""
        subscription_id = await self._lookup(request)
        replay_id = str(request.path_params["replay"])
        if request.method == "DELETE":
            keep = self._dispatcher.in_flight(subscription_id)
            cancelled = await self._archive.cancel_replay(subscription_id, replay_id, keep)
            if cancelled is None:
                raise NotFound(f"no replay {replay_id[:64]!r} of this subscription")
            replay, removed = cancelled
            self._dispatcher.withdrawn(removed)
            self._replayer.stopped(replay.id)
            if replay.state == "cancelled":  # a repeated cancel emits the same id: de-duplicated
                self._replayer.ended(replay)
            return JSONResponse(replay_json(replay))
        for replay in await self._archive.replays(subscription_id):
            if replay.id == replay_id:
                return JSONResponse(replay_json(replay), headers={"Cache-Control": "no-store"})
        raise NotFound(f"no replay {replay_id[:64]!r} of this subscription")

    async def _check_caps(self, subscription: Subscription) -> None:
        """429 when ``subscription``, or its tenant, has as many replays scanning as it may."""
        scanning = await self._archive.replays(None)  # every replay with events left to queue
        own = sum(1 for replay in scanning if replay.subscription == subscription.id)
        if own >= self._caps.per_subscription:
            raise TooManyReplays(
                f"the subscription has {own} replays still scanning the archive, as many as it may"
                f" (--max-replays-per-subscription {self._caps.per_subscription}); wait for one to"
                " finish or cancel one",
                CAP_RETRY_AFTER,
            )
        tenants = {
            replay.subscription: sub.tenant
            for replay in scanning
            if (sub := self._subscriptions.get(replay.subscription)) is not None
        }
        theirs = sum(1 for replay in scanning if tenants.get(replay.subscription, "") == subscription.tenant)
        if theirs >= self._caps.per_tenant:
            raise TooManyReplays(
                f"the tenant's subscriptions have {theirs} replays still scanning the archive, as many"
                f" as it may (--max-replays-per-tenant {self._caps.per_tenant}); wait for one to finish"
                " or cancel one",
                CAP_RETRY_AFTER,
            )

    async def _held(self, since: float) -> None:
        """Refuse a range that starts before what the archive can hold (to the millisecond, as
        the API writes times: the oldest time shown is a valid ``from``)."""
        stats = await self._archive.stats()
        if since >= stats.horizon - TIME_RESOLUTION:
            return
        if self._archive.retention <= 0:
            detail = "the archive is off (--retention 0): no event is kept for replays"
        elif stats.oldest is None:
            kept = format_duration(self._archive.retention)
            detail = f"is older than the retention; no event is held (events are kept {kept})"
        else:
            oldest = timestamp(stats.oldest)
            detail = f"is older than the retention; the oldest event held was accepted at {oldest}"
        raise ValidationError([FieldProblem("/from", detail)])

    async def _first(self, chosen: ReplayFilter, since: float, until: float) -> list[dict[str, Any]]:
        """The first :data:`PREVIEWS` archived events in ``[since, until)`` the replay delivers."""
        found: list[dict[str, Any]] = []
        position = (since, -1)
        while True:
            page = await self._archive.read(position, until, PAGE)
            for archived in page:
                event = orjson.loads(archived.body)
                if chosen.matches(event):
                    found.append(event)
                    if len(found) == PREVIEWS:
                        return found
            if len(page) < PAGE:
                return found
            position = page[-1].position

    async def _count(self, chosen: ReplayFilter, since: float, until: float) -> int:
        """How many archived events in ``[since, until)`` the replay delivers, a page at a time."""
        count = 0
        position = (since, -1)
        while True:
            page = await self._archive.read(position, until, PAGE)
            count += chosen.count(page)
            if len(page) < PAGE:
                return count
            position = page[-1].position
