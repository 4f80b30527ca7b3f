"""Ingest on SQLite (``append``): the events, their de-duplication keys and one delivery row per
matched subscription in the same transaction, so an acknowledged event always has its
deliveries on disk; concurrent calls are merged into one write."""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from cebroker.storage.deliveries import Appended, Incoming
from cebroker.storage.sqlite.rows import LogBase, NewDelivery, chunks

#: Claims the ``[tenant, source, id]`` keys of an append: a key not seen since the horizon
#: (``?3``) is written with the time of the append (``?2``) and returned; a key seen since is
#: left as it was and not returned, and a key repeated in the same call is returned once (its
#: later rows find the row its first one wrote). One statement decides and records the
#: de-duplication of a whole group.
SEEN_CLAIM = (
    "INSERT INTO pipeline_seen (tenant, source, id, at) SELECT value->>0, value->>1, value->>2, ?2"
    " FROM json_each(?1) WHERE true ON CONFLICT (tenant, source, id) DO UPDATE SET at = excluded.at"
    " WHERE pipeline_seen.at < ?3 RETURNING tenant, source, id"
)
# ``value->1`` is the event object as JSON text (SQLite keeps number and string spellings).
EVENTS_INSERT = (
    "INSERT INTO pipeline_events (seq, body, received, archived) "
    "SELECT value->>0, value->1, ?2, ?3 FROM json_each(?1)"
)
# The same with each event's trace context, ``value->>2`` (NULL past the end of a shorter row):
# used only when an event of the call is traced, so untraced ingest parses no more than before.
EVENTS_INSERT_TRACED = (
    "INSERT INTO pipeline_events (seq, body, received, archived, trace) "
    "SELECT value->>0, value->1, ?2, ?3, value->>2 FROM json_each(?1)"
)

ARCHIVE_ADD = "UPDATE pipeline_archive SET events = events + ?, bytes = bytes + ?"


@dataclass(slots=True)
class _AppendCall:
    """One ``append`` waiting for the writer; the writer fills ``result`` or ``error``."""

    items: Sequence[Incoming]
    result: list[Appended | None] | None = None
    error: BaseException | None = None


class SqliteIngest(LogBase):
    """``append`` (:class:`~cebroker.storage.ingest.Ingest`), and the ids it reads at open."""

    #: Calls of append() waiting for the writer (appended on the loop, drained in the thread).
    _appends: deque[_AppendCall]

    def load(self, conn: sqlite3.Connection) -> None:
        """Read the next ids to assign (on the writer's connection, before it serves jobs)."""
        self._next_seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM pipeline_events").fetchone()[0]
        self._next_delivery = conn.execute(
            "SELECT COALESCE(MAX(id), 0) + 1 FROM pipeline_deliveries"
        ).fetchone()[0]

    # -- ingest ------------------------------------------------------------------------------

    async def append(
        self,
        items: Sequence[Incoming],
        *,
        version: int | None = None,
        durable: Callable[[list[Appended | None]], None] | None = None,
    ) -> list[Appended | None]:
        """Commit events and their deliveries (durable); per event what was written, or None for
        a duplicate of an event seen within the de-duplication window. ``version`` is not
        checked: the one process's index follows its store synchronously; ``durable`` is called
        when the commit's result reaches the event loop.

        Concurrent calls are merged: the first of their jobs the writer runs writes the events
        of every call waiting at that moment, and the others find their result ready (each
        caller is still answered only after a commit that holds its events). Rows travel to
        SQLite as one JSON array per table, expanded by ``json_each``, so a whole group is a
        handful of statements: each statement hands the GIL to and from the event loop, and
        under CPU contention every handoff can cost milliseconds.
        """
        call = _AppendCall(items)
        self._appends.append(call)

        def job(conn: sqlite3.Connection) -> list[Appended | None]:
            if call.result is None and call.error is None:
                self._append_waiting(conn)
            if call.error is not None:
                raise call.error
            if call.result is None:
                raise RuntimeError("append was not written")  # _append_waiting sets one of the two
            return call.result

        # Guarded: the job writes only through _append_waiting, which rolls its own savepoint
        # back on failure, so the writer's per-job savepoint would be two wasted statements.
        result = await self._db.write(job, bounded=True, guarded=True)
        if durable is not None:
            durable(result)
        return result

    def _append_waiting(self, conn: sqlite3.Connection) -> None:
        """Write every waiting call at once; if that fails, each on its own, so one caller's
        bad input (an event that is not JSON-serialisable) fails only that caller.

        A sqlite3 error is the storage failing, not the input: it propagates and the writer
        rolls the whole transaction back. The calls written here may belong to jobs of a later
        group, so their results are withdrawn if this transaction does not commit: no caller is
        ever told that events were written when they were not.
        """
        calls: list[_AppendCall] = []
        while self._appends:
            calls.append(self._appends.popleft())

        def undo(error: BaseException) -> None:
            for call in calls:
                if call.result is not None:
                    call.result, call.error = None, error

        self._db.writer.on_rollback(undo)
        conn.execute("SAVEPOINT merged")
        try:
            results = self._write(conn, [item for call in calls for item in call.items])
        except sqlite3.Error:
            raise
        except Exception:
            conn.execute("ROLLBACK TO merged")
            conn.execute("RELEASE merged")
            if len(calls) == 1:
                raise
            for call in calls:
                conn.execute("SAVEPOINT single")
                try:
                    call.result = self._write(conn, call.items)
                except sqlite3.Error:
                    raise
                except Exception as exc:
                    conn.execute("ROLLBACK TO single")
                    call.error = exc
                conn.execute("RELEASE single")
            return
        conn.execute("RELEASE merged")
        start = 0
        for call in calls:
            call.result = results[start : start + len(call.items)]
            start += len(call.items)

    def _write(self, conn: sqlite3.Connection, items: Sequence[Incoming]) -> list[Appended | None]:
        now = self._clock.now()
        keep = self.retention > 0
        keys = [(item.tenant, item.source, item.id) for item in items]
        claimed: set[tuple[str, str, str]] = set()
        for _, chunk in chunks(keys):
            found = conn.execute(SEEN_CLAIM, (orjson.dumps(chunk), now, now - self.dedup_window))
            claimed.update((tenant, source, key) for tenant, source, key in found)
        out: list[Appended | None] = []
        events: list[tuple[Any, ...]] = []
        traced = False
        size = 0
        # Rows ``[id, seq, subscription]`` when no event of the call has an ordering group (the
        # common case, written as they are); otherwise every row as a NewDelivery, whose
        # groups decide which rows wait (:meth:`write_deliveries`).
        grouped = any(item.groups for item in items)
        plain: list[list[Any]] = []
        deliveries: list[NewDelivery] = []
        for item, key in zip(items, keys, strict=True):
            if key not in claimed:
                out.append(None)
                continue
            claimed.discard(key)  # a later event with the same key is a duplicate of this one
            seq = 0
            pairs: list[tuple[int, str]] = []
            if item.subscriptions or keep:
                seq = self._next_seq
                self._next_seq += 1
                event = item.event
                parsed = type(event) is dict or isinstance(event, Mapping)
                if keep:  # serialized alone, so that the archive knows its size
                    body = orjson.dumps(event) if parsed else event
                    body = body.encode() if isinstance(body, str) else body
                    size += len(body)
                    stored: Any = orjson.Fragment(body)
                else:
                    stored = event if parsed else orjson.Fragment(event)
                if item.trace is None:
                    events.append((seq, stored))
                else:
                    events.append((seq, stored, item.trace))
                    traced = True
                if grouped:
                    groups = item.groups or (None,) * len(item.subscriptions)
                    for sub, group in zip(item.subscriptions, groups, strict=True):
                        row = NewDelivery(seq, sub, group, id=self.take_id())
                        deliveries.append(row)
                        pairs.append((row.id, sub))
                else:
                    for sub in item.subscriptions:
                        delivery = self.take_id()
                        plain.append([delivery, seq, sub])
                        pairs.append((delivery, sub))
            out.append(Appended(seq, now, pairs))
        insert = EVENTS_INSERT_TRACED if traced else EVENTS_INSERT
        for _, new_events in chunks(events):
            conn.execute(insert, (orjson.dumps(new_events), now, 1 if keep else 0))
        if keep and events:
            conn.execute(ARCHIVE_ADD, (len(events), size))
        if grouped:
            self.write_deliveries(conn, deliveries, now)
        else:
            self.insert_deliveries(conn, plain, now)
        return out

    def last_seq(self) -> int:
        """The sequence number of the last event written (on the writer thread)."""
        return self._next_seq - 1
