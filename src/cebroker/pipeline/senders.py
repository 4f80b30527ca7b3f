"""One :class:`ceprotocols.sender.Sender` per protocol for the broker's lifetime.

HTTP is built here with the broker's settings (webhook origin, validation switch); every other
protocol comes from ``ceprotocols.registry.create_sender``. Until that registry exists only HTTP
is available, and a subscription of another protocol fails its deliveries as retryable (they
are kept and retried, then dead-lettered with the reason once their time to live has passed).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable

from ceprotocols.errors import DeliveryError
from ceprotocols.http import HttpSender
from ceprotocols.sender import Destination, Event, Sender

from cebroker.storage.deliveries import DeliveryLog

log = logging.getLogger("cebroker.pipeline")


def _registry() -> Callable[[str], Sender] | None:
    try:
        module = importlib.import_module("ceprotocols.registry")
    except ImportError:
        return None
    factory: Callable[[str], Sender] | None = getattr(module, "create_sender", None)
    return factory


class _Unavailable:
    """Stands in for a protocol whose sender cannot be created (missing extra, unknown name)."""

    def __init__(self, protocol: str, reason: str) -> None:
        self._message = f"no sender for protocol {protocol!r}: {reason}"

    async def deliver(self, event: Event, destination: Destination) -> None:
        raise DeliveryError(self._message, retryable=True)

    async def aclose(self) -> None:
        return None


class SharedCap:
    """A webhook origin's granted rate held by every broker instance together: each request
    takes a token of the origin's bucket in the shared delivery log."""

    def __init__(self, buckets: DeliveryLog, origin: str, per_minute: float) -> None:
        self._buckets = buckets
        self._key = f"webhook {origin}"
        self._rate = per_minute / 60.0

    async def acquire(self) -> None:
        """Wait until the shared bucket gives a token."""
        while True:
            wait = await self._buckets.take(self._key, self._rate)
            if wait <= 0:
                return
            await asyncio.sleep(wait)


class SenderPool:
    """Creates each protocol's sender on first use and closes them all at shutdown.

    ``buckets``: a shared delivery log whose token buckets hold the webhook handshake's allowed
    rates for every instance together (None: each sender caps its own rate).
    """

    def __init__(
        self, *, webhook_origin: str, validate_webhooks: bool, buckets: DeliveryLog | None = None
    ) -> None:
        self._http_options = {"webhook_origin": webhook_origin, "validate_webhooks": validate_webhooks}
        self._buckets = buckets
        self._senders: dict[str, Sender] = {}

    def get(self, protocol: str) -> Sender:
        """The sender for ``protocol`` (created once)."""
        sender = self._senders.get(protocol)
        if sender is None:
            sender = self._senders[protocol] = self._create(protocol)
        return sender

    def _create(self, protocol: str) -> Sender:
        if protocol == "HTTP":
            buckets = self._buckets
            return HttpSender(
                webhook_origin=str(self._http_options["webhook_origin"]),
                validate_webhooks=bool(self._http_options["validate_webhooks"]),
                rate_caps=(lambda origin, rate: SharedCap(buckets, origin, rate)) if buckets else None,
            )
        factory = _registry()
        if factory is None:
            return _Unavailable(protocol, "only HTTP is available in this installation")
        try:
            return factory(protocol)
        except Exception as exc:  # unknown protocol or a missing optional dependency
            log.error("cannot create a sender for %s: %s", protocol, exc)
            return _Unavailable(protocol, str(exc))

    async def aclose(self) -> None:
        """Close every sender."""
        senders, self._senders = list(self._senders.values()), {}
        for sender in senders:
            try:
                await sender.aclose()
            except Exception:
                log.exception("closing a sender failed")
