"""``POST /events`` served by the HTTP server's protocol itself (:mod:`cebroker.web.direct`).

The broker's hottest call skips the ASGI path when it can be served alone with the answer the
app would give: a single event, structured or binary, small enough to parse on the event loop,
from a caller the authenticator knows without waiting on anything (no credentials configured,
or an API key) and who may publish, which the ingestor admits as it is (well-formed, not of a
reserved type, allowed by the tenant's publish policy, with room in the backlog, and no
definitions to check it against). It is committed as the app commits it and answered ``202``
once durable; the request is counted in the request metrics as the app counts it.

Everything else goes to the app, which answers as it always has: batches, ``Prefer: wait``
(request-reply), any request it would refuse (so every refusal still comes from one place, with
its problem details and its count), OIDC tokens. A commit that fails hands the request to the
app as well, which tries it once more and answers with its own success or error. The app is
built without this route when tracing is on (each request then gets its spans from the app's
middleware).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import orjson

from cebroker.pipeline.ingest import EventIngestor
from cebroker.pipeline.routes.events import EventsApi, accepted_headers
from cebroker.principal import Principal
from cebroker.telemetry.http import HttpMetrics
from cebroker.web.direct import RawHeaders, Reply

_ROUTE = "/events"
log = logging.getLogger("cebroker.pipeline")


class DirectEvents:
    """A :class:`~cebroker.web.direct.DirectRoute` for ``POST /events``.

    Args:
        known: the principal behind an ``Authorization`` header when the app's authenticator
            finds it without waiting on anything, else None (``Authenticator.known``).
        needed: the scope the app's access rules ask of ``POST /events``.
        metrics: the request metrics of the app's middleware (None: the app counts none).
    """

    method = b"POST"
    path = _ROUTE.encode()

    def __init__(
        self,
        api: EventsApi,
        ingestor: EventIngestor,
        *,
        known: Callable[[str | None], Principal | None],
        needed: str,
        metrics: HttpMetrics | None,
    ) -> None:
        self._api = api
        self._ingestor = ingestor
        self._known = known
        self._needed = needed
        self._metrics = metrics
        #: Requests taken in this turn of the event loop, committed together at its end.
        self._taken: list[_Taken] = []
        #: Commits under way (the event loop keeps only weak references to tasks).
        self._commits: set[asyncio.Task[None]] = set()

    def take(self, headers: RawHeaders, body: bytes, reply: Reply) -> bool:
        """Commit the request's event and answer 202 once durable, or leave it to the app."""
        started = time.perf_counter()
        content_type: bytes | None = None
        authorization: bytes | None = None
        for name, value in headers:
            if name == b"content-type":
                if content_type is not None:
                    return False
                content_type = value
            elif name == b"authorization":
                if authorization is not None:
                    return False
                authorization = value
            elif name == b"prefer":
                return False
        principal = self._known(None if authorization is None else authorization.decode("latin-1"))
        if principal is None or not principal.may(self._needed):
            return False
        events = self._api.direct_events(headers, content_type or b"", body)
        if events is None:
            return False
        clean = self._ingestor.admitted(events, permit=self._api.permit(principal))
        if clean is None or len(clean) != 1:
            return False
        if not self._taken:
            # The commit's task is made now and takes the requests when it first runs, in the
            # event loop's next turn: every request taken in the rest of this turn joins it. (A
            # callback scheduled for the next turn that then made the task cost each request one
            # more turn of the loop before its commit was sent: under load each turn runs a
            # burst of other requests' work.)
            self._spawn(self._commit_taken())
        self._taken.append(_Taken(clean[0], principal.tenant, reply, started))
        return True

    def _spawn(self, commit: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(commit)
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)

    async def _commit_taken(self) -> None:
        """Commit the events taken in the turn of the event loop before together, one call per
        publishing tenant (de-duplication is per tenant): the first tenant's in this task, the
        others' in tasks of their own."""
        taken, self._taken = self._taken, []
        tenants: dict[str | None, list[_Taken]] = {}
        for request in taken:
            tenants.setdefault(request.tenant, []).append(request)
        first, *others = tenants.items()
        for tenant, requests in others:
            self._spawn(self._commit(tenant, requests))
        await self._commit(*first)

    async def _commit(self, tenant: str | None, requests: list[_Taken]) -> None:
        answered = False

        def answer(duplicated: list[bool]) -> None:
            # As soon as the events are durable, before the dispatcher is handed them.
            nonlocal answered
            answered = True
            metrics = self._metrics
            for request, duplicate in zip(requests, duplicated, strict=True):
                request.reply.answer(202, *_ANSWERS[duplicate])
                if metrics is not None:
                    metrics.observe(_ROUTE, "POST", 202, time.perf_counter() - request.started)

        try:
            await self._ingestor.commit_each(
                [request.event for request in requests], tenant=tenant, protocol="http", durable=answer
            )
        except Exception:
            if answered:
                # Answered 202 once durable: what failed after that is not the client's.
                log.exception("answered events failed after their commit")
                return
            # Nothing committed, or (a failure after the append) committed already: the app
            # tries once more and answers, with a duplicate in the second case (at-least-once).
            for request in requests:
                request.reply.decline()


def _answer(duplicates: int) -> tuple[RawHeaders, bytes]:
    body = orjson.dumps({"accepted": 1, "duplicates": duplicates})
    return accepted_headers(len(body)), body


#: The answer to one event, by whether it was a duplicate (the app's answer, made once).
_ANSWERS = {False: _answer(0), True: _answer(1)}


@dataclass(slots=True)
class _Taken:
    """A request taken: its event (checked), its publisher's tenant, how to answer it, and
    when it was offered."""

    event: dict[str, Any]
    tenant: str | None
    reply: Reply
    started: float
