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
import time
from collections.abc import Callable

import orjson

from cebroker.contracts import IngestResult
from cebroker.pipeline.ingest import EventIngestor
from cebroker.pipeline.routes.events import EventsApi, accepted_headers
from cebroker.principal import Principal
from cebroker.telemetry.http import HttpMetrics
from cebroker.web.direct import RawHeaders, Reply

_ROUTE = "/events"


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
        #: Commits under way (the event loop keeps only weak references to tasks).
        self._commits: set[asyncio.Task[IngestResult]] = set()

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
        if clean is None:
            return False
        commit = asyncio.ensure_future(self._ingestor.commit(clean, tenant=principal.tenant, protocol="http"))
        self._commits.add(commit)
        commit.add_done_callback(lambda done: self._answer(done, reply, started))
        return True

    def _answer(self, done: asyncio.Task[IngestResult], reply: Reply, started: float) -> None:
        self._commits.discard(done)
        if done.cancelled() or done.exception() is not None:
            reply.decline()  # nothing was committed: the app tries once more and answers
            return
        result = done.result()
        body = orjson.dumps({"accepted": result.accepted, "duplicates": result.duplicates})
        reply.answer(202, accepted_headers(len(body)), body)
        if self._metrics is not None:
            self._metrics.observe(_ROUTE, "POST", 202, time.perf_counter() - started)
