"""CloudEvents HTTP webhook abuse protection (HTTP 1.1 Web Hooks for Event Delivery, section 4).

Before the first delivery to a sink origin the sender asks with ``OPTIONS`` and
``WebHook-Request-Origin``; it delivers only when the answer carries ``WebHook-Allowed-Origin``
equal to its origin (or ``*``). ``WebHook-Allowed-Rate`` (requests per minute, or ``*``) becomes
that origin's rate cap. Grants are cached per sink origin; refusals are remembered for a short
while so that a refusing sink is not asked for every event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from ceprotocols.errors import DeliveryRejected, DeliveryTimeout
from ceprotocols.http.transport import HttpTransport, HttpTransportError, delivery_error

#: Seconds a refusal is remembered before the sink is asked again.
REFUSAL_TTL = 30.0


def origin_of(url: str) -> str:
    """``scheme://host:port`` of a sink URL: the unit a grant applies to."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


class Admission(Protocol):
    """Waits until one more request may go to an origin (a rate cap)."""

    async def acquire(self) -> None:
        """Return once a request may be sent."""
        ...


#: Builds the cap of an origin from the origin and its granted requests per minute; the default
#: is an in-process :class:`RateCap`, an embedding that runs several senders against the same
#: sinks (several broker instances) passes one they share.
CapFactory = Callable[[str, float], Admission]


class RateCap:
    """A token bucket allowing ``per_minute`` requests per minute, bursting up to one second's worth."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait until a request may be sent."""
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await asyncio.sleep((1.0 - self._tokens) / self.rate)


@dataclass(slots=True)
class _Grant:
    allowed: bool
    cap: Admission | None
    checked_at: float
    reason: str = ""


class WebhookGate:
    """Runs the validation handshake once per sink origin and enforces the granted rate."""

    def __init__(self, transport: HttpTransport, origin: str, caps: CapFactory | None = None) -> None:
        self._transport = transport
        self.origin = origin
        self._caps: CapFactory = caps or (lambda _origin, per_minute: RateCap(per_minute))
        self._grants: dict[str, _Grant] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def admit(self, url: str, wait: float) -> None:
        """Return once a delivery to ``url`` may be sent; raise DeliveryRejected if refused.

        A handshake, and the wait for another delivery's handshake to the same origin, end
        within ``wait`` seconds (:class:`DeliveryTimeout` otherwise): deliveries queued behind
        the handshake of a sink that hangs must not wait one timeout each in turn.
        """
        key = origin_of(url)
        grant = self._grants.get(key)
        if grant is None or (not grant.allowed and time.monotonic() - grant.checked_at > REFUSAL_TTL):
            try:
                async with asyncio.timeout(wait), self._locks.setdefault(key, asyncio.Lock()):
                    grant = self._grants.get(key)
                    if grant is None or (
                        not grant.allowed and time.monotonic() - grant.checked_at > REFUSAL_TTL
                    ):
                        grant = await self._handshake(url, key, wait)
                        self._grants[key] = grant
            except TimeoutError as exc:
                raise DeliveryTimeout(f"webhook validation: no answer from {url} within {wait}s") from exc
        if not grant.allowed:
            raise DeliveryRejected(
                f"sink did not grant webhook delivery: {grant.reason}", retryable=False, status="refused"
            )
        if grant.cap is not None:
            await grant.cap.acquire()

    def forget(self, url: str) -> None:
        """Drop the cached grant for ``url``'s origin (e.g. before a redrive)."""
        self._grants.pop(origin_of(url), None)

    async def _handshake(self, url: str, key: str, wait: float) -> _Grant:
        try:
            response = await self._transport.request(
                "OPTIONS", url, {"WebHook-Request-Origin": self.origin}, b"", deadline=wait
            )
        except HttpTransportError as exc:
            raise delivery_error(exc, "webhook validation") from exc
        now = time.monotonic()
        allowed = response.headers.get("WebHook-Allowed-Origin", "").strip()
        if allowed not in ("*", self.origin):
            reason = f"OPTIONS answered {response.status} without an allowed origin for {self.origin}"
            return _Grant(False, None, now, reason)
        rate = response.headers.get("WebHook-Allowed-Rate", "*").strip()
        cap = None
        if rate != "*":
            try:
                per_minute = float(int(rate))
            except ValueError:
                return _Grant(False, None, now, f"invalid WebHook-Allowed-Rate {rate!r}")
            if per_minute <= 0:
                return _Grant(False, None, now, f"invalid WebHook-Allowed-Rate {rate!r}")
            cap = self._caps(key, per_minute)
        return _Grant(True, cap, now)
