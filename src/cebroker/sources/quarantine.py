"""Invalid messages kept for inspection, per source, bounded by count and bytes.

Every message a source refuses (it does not decode as a CloudEvent, breaks a limit, or ingest
refuses it) is kept with the reason, the time and the first bytes of the raw message, so that a
user can see what was sent. The oldest are dropped first once a source holds more than
:data:`MAX_REJECTS` messages or :data:`MAX_BYTES` bytes of them; drops are counted.

:class:`Rejects` is the interface the sources use; :class:`MemoryRejects` keeps them in memory
only (they do not survive a restart). :func:`quarantine` makes a source's handler of refused
messages: it keeps each and tells the broker event ``dev.cebroker.source.quarantined``, which
concerns no tenant (a source belongs to the broker, not to a tenant), so only subscriptions
without a tenant see it.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ceprotocols.receiver import OnReject, Reject

from cebroker.contracts import BrokerEventEmitter

log = logging.getLogger("cebroker.sources")

#: Per source: most refused messages kept, and most bytes of them (payload and headers).
MAX_REJECTS = 1000
MAX_BYTES = 4 * 1024 * 1024


def _time(at: float) -> str:
    """``at`` (seconds since the epoch) in RFC 3339, to the millisecond, in UTC."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@dataclass(frozen=True, slots=True)
class Kept:
    """One refused message as kept: ``seq`` orders them within a source (for paging)."""

    seq: int
    reject: Reject

    @property
    def size(self) -> int:
        """The bytes it holds."""
        raw = self.reject.raw
        return len(raw.payload) + sum(len(k) + len(v) for k, v in raw.headers) + len(self.reject.reason)

    def to_json(self) -> dict[str, Any]:
        """As ``GET /sources/{name}/rejects`` shows it."""
        raw = self.reject.raw
        doc: dict[str, Any] = {
            "seq": self.seq,
            "time": _time(self.reject.at),
            "reason": self.reject.reason,
            "size": raw.size,
            "headers": [{"name": name, "value": value} for name, value in raw.headers],
            "truncated": raw.size > len(raw.payload),
        }
        try:
            doc["payload"] = raw.payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            if doc["truncated"] and exc.start >= len(raw.payload) - 3:  # cut inside a character
                doc["payload"] = raw.payload[: exc.start].decode("utf-8", "backslashreplace")
            else:
                doc["payloadBase64"] = base64.b64encode(raw.payload).decode("ascii")
        return doc


class Rejects(Protocol):
    """Where a source's refused messages are kept."""

    def add(self, reject: Reject) -> None:
        """Keep ``reject`` (dropping the oldest when over the bounds)."""
        ...

    def page(self, after: int, limit: int) -> Sequence[Kept]:
        """Up to ``limit`` kept messages with ``seq`` greater than ``after``, oldest first."""
        ...

    @property
    def dropped(self) -> int:
        """How many were dropped to keep within the bounds."""
        ...


class MemoryRejects:
    """:class:`Rejects` in memory (thread-safe: receivers may report from their own threads)."""

    def __init__(self, max_count: int = MAX_REJECTS, max_bytes: int = MAX_BYTES) -> None:
        self._max_count = max_count
        self._max_bytes = max_bytes
        self._kept: deque[Kept] = deque()
        self._bytes = 0
        self._seq = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def add(self, reject: Reject) -> None:
        with self._lock:
            self._seq += 1
            kept = Kept(self._seq, reject)
            self._kept.append(kept)
            self._bytes += kept.size
            while len(self._kept) > self._max_count or (
                self._bytes > self._max_bytes and len(self._kept) > 1
            ):
                self._bytes -= self._kept.popleft().size
                self._dropped += 1

    def page(self, after: int, limit: int) -> Sequence[Kept]:
        with self._lock:
            return [k for k in self._kept if k.seq > after][:limit]

    @property
    def dropped(self) -> int:
        return self._dropped

    def __len__(self) -> int:
        return len(self._kept)


_: type[Rejects] = MemoryRejects


def quarantine(
    name: str, rejects: Rejects, events: BrokerEventEmitter | None, loop: asyncio.AbstractEventLoop
) -> OnReject:
    """The handler of the source ``name``'s refused messages: keep each in ``rejects``, then tell
    ``events`` (None: nothing to tell) the broker event ``source.quarantined`` with the source's
    name (never its URL, which may carry credentials), the reason, the message's size and when
    it was refused; it concerns no tenant. Receivers may call it from their own threads: the
    event is then emitted on ``loop``'s."""

    def quarantined(reject: Reject) -> None:
        rejects.add(reject)
        if events is None:
            return
        data = {"source": name, "reason": reject.reason, "size": reject.raw.size, "time": _time(reject.at)}
        emit = functools.partial(events.emit, "source.quarantined", data, tenant=None)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            emit()
            return
        try:
            loop.call_soon_threadsafe(emit)
        except RuntimeError:  # the loop is closed: the broker has stopped, its emitter with it
            log.warning("source %s: a quarantined message was not announced: the broker has stopped", name)

    return quarantined
