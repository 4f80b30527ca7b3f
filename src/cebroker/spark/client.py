"""POST batches of CloudEvents to the broker, retrying what is worth retrying.

One :class:`BatchClient` per Spark task holds one pooled ``httpx.Client``, so every batch of a
partition reuses the same keep-alive connections (one per request in flight). Errors are
translated here into the :class:`IngestError` tree; no httpx exception leaves this module::

    IngestError (RuntimeError)
    ├── IngestRejected     the broker refused the batch for good (401, 403, 404, 415, ...)
    └── IngestUnavailable  429/502/503/504 or connection failures outlasted the retry budget
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from cebroker.spark.options import RetryPolicy, SinkOptions

BATCH_CONTENT_TYPE = "application/cloudevents-batch+json"
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
_INDEXED_POINTER = re.compile(r"/(\d+)(/.*)?")


class IngestError(RuntimeError):
    """The broker did not take a batch; the message says what it answered."""


class IngestRejected(IngestError):
    """The broker refused a batch in a way a retry cannot fix."""


class IngestUnavailable(IngestError):
    """The broker kept refusing or could not be reached until the retry budget ran out."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """One event the broker refused (answered 400 naming it, or 413 for it alone)."""

    event: dict[str, Any]
    pointer: str | None
    reason: str


@dataclass(slots=True)
class SendStats:
    """What a client did so far: events accepted (``duplicates`` of them the broker already had,
    as when a micro-batch is replayed), HTTP requests made, retries among them."""

    accepted: int = 0
    duplicates: int = 0
    requests: int = 0
    retries: int = 0


class BatchClient:
    """Sends event batches in the batch content mode; use as a context manager."""

    def __init__(
        self,
        options: SinkOptions,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        headers = {"Content-Type": BATCH_CONTENT_TYPE, "Accept": "application/json"}
        if options.authorization:
            headers["Authorization"] = options.authorization
        self._url = options.url
        self._retry: RetryPolicy = options.retry
        self._sleep = sleep
        self._clock = clock
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(options.request_timeout, connect=options.connect_timeout),
            # Plain http needs no TLS context (loading the CA bundle costs each task ~0.1-0.5 s).
            verify=options.url.startswith("https:"),
            limits=httpx.Limits(
                max_connections=options.in_flight, max_keepalive_connections=options.in_flight
            ),
            transport=transport,
        )
        self.stats = SendStats()
        self._lock = threading.Lock()

    def __enter__(self) -> BatchClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connection."""
        self._http.close()

    def send(self, events: Sequence[dict[str, Any]]) -> list[Refusal]:
        """Deliver ``events`` durably to the broker (a 202 for each of them), or raise.

        Events the broker refuses individually (a 400 naming their index, or a 413 for a single
        event) are returned, and the rest of the batch is sent again. Safe to call from several
        threads at once (up to the connection limit given at construction).
        """
        if not events:
            return []
        response = self._post(events)
        status = response.status_code
        if 200 <= status < 300:
            self._count(accepted=len(events), duplicates=_duplicates(response))
            return []
        if status == 413 and len(events) > 1:
            half = len(events) // 2
            return self.send(events[:half]) + self.send(events[half:])
        if status == 413:
            return [
                Refusal(events[0], None, f"the broker refused the event as too large: {_detail(response)}")
            ]
        if status == 400:
            return self._resend_valid(events, response)
        raise IngestRejected(f"POST {self._url} answered {status}: {_detail(response)}")

    def _resend_valid(self, events: Sequence[dict[str, Any]], response: httpx.Response) -> list[Refusal]:
        bad = _indexed_problems(response, len(events))
        if not bad:
            raise IngestRejected(f"POST {self._url} answered 400 without naming events: {_detail(response)}")
        refused = [
            Refusal(events[index], pointer, f"refused by the broker: {reason}")
            for index, (pointer, reason) in sorted(bad.items())
        ]
        return refused + self.send([event for index, event in enumerate(events) if index not in bad])

    def _count(self, **increments: int) -> None:
        with self._lock:
            for name, value in increments.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)

    def _post(self, events: Sequence[dict[str, Any]]) -> httpx.Response:
        body = json.dumps(events, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        started = self._clock()
        attempt = 0
        while True:
            self._count(requests=1)
            retry_after: float | None = None
            try:
                response = self._http.post(self._url, content=body)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code not in RETRYABLE_STATUS:
                    return response
                last = f"HTTP {response.status_code}"
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            attempt += 1
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            elapsed = self._clock() - started
            if elapsed + delay > self._retry.max_time:
                raise IngestUnavailable(
                    f"POST {self._url}: gave up after {attempt} attempts in {elapsed:.1f} s "
                    f"(retry budget {self._retry.max_time:g} s); last answer: {last}"
                )
            self._count(retries=1)
            self._sleep(delay)

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self._retry.max_backoff, self._retry.initial_backoff * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + random.random() / 2)  # jitter spreads out retrying executors


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date), if usable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _indexed_problems(response: httpx.Response, size: int) -> dict[int, tuple[str | None, str]]:
    """``{index: (pointer within the event, reason)}`` from a problem+json ``errors`` list; empty
    when any entry does not name an event of the batch (then nothing can be resent safely)."""
    try:
        body = response.json()
    except ValueError:
        return {}
    entries = body.get("errors") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not entries:
        return {}
    found: dict[int, tuple[str | None, str]] = {}
    for entry in entries:
        pointer = entry.get("pointer") if isinstance(entry, dict) else None
        match = _INDEXED_POINTER.fullmatch(pointer) if isinstance(pointer, str) else None
        if match is None or int(match.group(1)) >= size:
            return {}
        reason = str(entry.get("detail") or entry.get("message") or "invalid")
        found.setdefault(int(match.group(1)), (match.group(2) or None, reason))
    return found


def _duplicates(response: httpx.Response) -> int:
    """The broker's count of already-seen events in an accepted batch (0 if it gives none)."""
    try:
        body = response.json()
    except ValueError:
        return 0
    count = body.get("duplicates") if isinstance(body, dict) else None
    return count if isinstance(count, int) else 0


def _detail(response: httpx.Response) -> str:
    text = response.text.strip()
    return text[:500] if text else response.reason_phrase
