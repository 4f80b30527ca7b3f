"""The :class:`~cebroker.storage.replies.ReplyChannel` of a shared PostgreSQL log:
``NOTIFY cebroker_replies`` with the reply's JSON as the payload, heard by every instance's
listener (this one's included).

A NOTIFY payload must stay under 8000 bytes: a reply whose JSON is longer than
:data:`MAX_PAYLOAD` is announced to this instance only (it is committed and delivered as usual;
a producer waiting on another instance does not get it, and its wait ends in 504). Announcing
happens after the reply's commit, on a connection of the pool, once per ingest call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cebroker.storage.postgres.database import Database
from cebroker.storage.postgres.listener import REPLIES, Listener
from cebroker.storage.replies import Handlers, ReplyHandler

log = logging.getLogger("cebroker.storage")

#: Longest payload announced to every instance.
MAX_PAYLOAD = 7000


class PostgresReplyChannel:
    """Announces replies with NOTIFY and hands the ones heard to this instance's handlers."""

    def __init__(self, db: Database, listener: Listener) -> None:
        self._db = db
        self._handlers = Handlers()
        #: Replies too long for a NOTIFY, announced to this instance only.
        self.too_long = 0
        listener.on(REPLIES, self._heard)

    async def announce(self, events: Sequence[Mapping[str, Any]]) -> None:
        """NOTIFY every instance of ``events`` (those too long: this instance only)."""
        payloads: list[str] = []
        for event in events:
            text = json.dumps(event, separators=(",", ":"), default=str)
            if len(text.encode()) <= MAX_PAYLOAD:
                payloads.append(text)
            else:
                self.too_long += 1
                self._handlers.tell(event)
        if payloads:
            await self._db.call("SELECT pg_notify(%s, p) FROM unnest(%b::text[]) AS p", (REPLIES, payloads))

    def watch(self, handler: ReplyHandler) -> Callable[[], None]:
        """Call ``handler`` with every reply announced by any instance."""
        return self._handlers.add(handler)

    def _heard(self, payload: str) -> None:
        try:
            event = json.loads(payload)
        except ValueError:
            log.warning("a reply announcement is not JSON; ignored")
            return
        if isinstance(event, dict):
            self._handlers.tell(event)
