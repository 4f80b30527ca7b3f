"""One :class:`ceprotocols.sender.Sender` per protocol for the broker's lifetime.

Every sender connects only where the broker's :class:`~ceprotocols.egress.NetworkPolicy`
allows, checked on the address it connects to (sinks of every protocol; for HTTP also the
token endpoints, the webhook handshake and the dead-letter sinks, which go through the HTTP
sender): a refused address is a final ``DestinationRefused``, so the delivery becomes a dead
letter naming the reason and no request is made. HTTP is built here with the broker's settings
(webhook origin, validation switch) and no shared connection cap (see
:meth:`SenderPool._create`); every other protocol comes from
``ceprotocols.registry.create_sender``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from ceprotocols.egress import NetworkPolicy, Resolver, system_resolver
from ceprotocols.errors import DeliveryError
from ceprotocols.http import HttpSender
from ceprotocols.registry import SenderFactory, create_sender
from ceprotocols.sender import Destination, Event, Sender
from ceprotocols.tracecontext import TraceContext

from cebroker.storage.buckets import RateBuckets

log = logging.getLogger("cebroker.pipeline")


class _Unavailable:
    """Stands in for a protocol whose sender cannot be created (missing extra, unknown name)."""

    def __init__(self, protocol: str, reason: str) -> None:
        self._message = f"no sender for protocol {protocol!r}: {reason}"

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        raise DeliveryError(self._message, retryable=True)

    async def aclose(self) -> None:
        return None


class SharedCap:
    """A webhook origin's granted rate held by every broker instance together: each request
    takes a token of the origin's bucket in the shared delivery log."""

    def __init__(self, buckets: RateBuckets, origin: str, per_minute: float) -> None:
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

    Args:
        webhook_origin: the origin the HTTP sender announces in the webhook handshake.
        validate_webhooks: run the handshake before the first delivery to an origin.
        policy: where senders may connect (a broker always passes its own; there is no
            unrestricted default here).
        resolver: how senders resolve host names before checking them.
        buckets: token buckets held by every instance together (a shared backend's claims),
            for the webhook handshake's allowed rates (None: each sender caps its own rate).
        factories: protocol name -> factory of the sender that takes the built-in one's place
            (the test suite's in-memory sender). It is given the same policy and resolver. Only
            code that builds a broker can pass it: no setting names a sender, so the senders a
            subscription can reach are the registry's unless the embedding code says otherwise.
    """

    def __init__(
        self,
        *,
        webhook_origin: str,
        validate_webhooks: bool,
        policy: NetworkPolicy,
        resolver: Resolver = system_resolver,
        buckets: RateBuckets | None = None,
        factories: Mapping[str, SenderFactory] | None = None,
    ) -> None:
        self._webhook_origin = webhook_origin
        self._validate_webhooks = validate_webhooks
        self._policy = policy
        self._resolver = resolver
        self._buckets = buckets
        self._factories = dict(factories or {})
        self._senders: dict[str, Sender] = {}

    def get(self, protocol: str) -> Sender:
        """The sender for ``protocol`` (created once)."""
        sender = self._senders.get(protocol)
        if sender is None:
            sender = self._senders[protocol] = self._create(protocol)
        return sender

    def _create(self, protocol: str) -> Sender:
        factory = self._factories.get(protocol)
        if factory is not None:
            return factory(policy=self._policy, resolver=self._resolver)
        if protocol == "HTTP":
            # No shared connection cap: each subscription's lane bounds its own deliveries in
            # flight (its concurrency, at most MAX_CONCURRENCY), so one connection each; a cap
            # shared by every subscription would let sinks that hang take all of it.
            buckets = self._buckets
            return HttpSender(
                webhook_origin=self._webhook_origin,
                validate_webhooks=self._validate_webhooks,
                rate_caps=(lambda origin, rate: SharedCap(buckets, origin, rate)) if buckets else None,
                policy=self._policy,
                resolver=self._resolver,
                max_connections=0,
                max_per_host=0,
            )
        try:
            return create_sender(protocol, policy=self._policy, resolver=self._resolver)
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
