"""AMQP 1.0 delivery with python-qpid-proton.

Sink: ``amqp://host[:5672][/address]`` or ``amqps://``. Settings (Subscriptions API 3.2.5.3):
``address`` (or the sink path), ``linkname``, ``sendersettlementmode`` (``unsettled`` default,
``settled``), ``linkproperties``, and ``contentmode``. On an unsettled link a delivery completes
when the peer settles it ``accepted``; ``rejected`` is a permanent refusal, ``released`` and
``modified`` are retryable.
"""

from __future__ import annotations

from dataclasses import replace

from ceprotocols.amqp import binding
from ceprotocols.amqp.connection import AmqpConnection
from ceprotocols.amqp.settings import SCHEMES, AmqpSettings, parse_settings
from ceprotocols.credentials import Credential, ensure_fresh, parse_credential
from ceprotocols.egress import ConnectGuard, NetworkPolicy, Resolver, system_resolver
from ceprotocols.egress.addresses import parse_address
from ceprotocols.endpoint import Endpoint, sink_endpoint
from ceprotocols.errors import (
    INVALID_EVENT,
    INVALID_SETTINGS,
    DeliveryError,
    TargetUnreachable,
)
from ceprotocols.pool import ConnectionPool
from ceprotocols.prepared import PreparedCache
from ceprotocols.sender import Destination, Event
from ceprotocols.tracecontext import TraceContext

_Key = tuple[str, str, int, Credential | None]


class AmqpSender:
    """Delivers events to AMQP 1.0 containers; one connection per (container, credentials).

    Args:
        policy: the addresses containers may have. With a restricted policy the sender
            resolves the sink's host itself, checks every address and connects to a checked
            one, announcing the name in the ``open`` frame and for TLS; ``None`` means
            :meth:`NetworkPolicy.unrestricted`.
        resolver: how host names are resolved when the policy is restricted.
    """

    def __init__(self, *, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver) -> None:
        self._guard = ConnectGuard(policy or NetworkPolicy.unrestricted(), resolver)
        self._prepared = PreparedCache(self._prepare)
        self._pool: ConnectionPool[_Key, AmqpConnection] = ConnectionPool(self._close)

    @property
    def connections(self) -> int:
        """How many AMQP connections are open."""
        return len(self._pool)

    def _prepare(self, destination: Destination) -> tuple[Endpoint, AmqpSettings, Credential | None, _Key]:
        endpoint = sink_endpoint(destination.sink, schemes=SCHEMES)
        with INVALID_SETTINGS:
            settings = parse_settings(destination.settings, endpoint)
            credential = parse_credential(destination.credential, protocol="AMQP", token_supported=False)
        return endpoint, settings, credential, (endpoint.scheme, endpoint.host, endpoint.port, credential)

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Send ``event`` and return once it is settled (see the module doc)."""
        endpoint, settings, credential, key = self._prepared.get(destination)
        ensure_fresh(credential)
        with INVALID_EVENT:
            message = binding.to_structured(event) if settings.structured else binding.to_binary(event)
        if trace is not None:
            message = replace(
                message, application_properties={**message.application_properties, **dict(trace.pairs())}
            )
        connection = self._pool.held(key) or await self._pool.get(
            key, lambda: self._open(endpoint, credential, destination.timeout)
        )
        try:
            await connection.send(settings, message, destination.timeout)
        except DeliveryError:
            if connection.broken:
                await self._pool.discard(key, connection)
            raise

    async def _open(self, endpoint: Endpoint, credential: Credential | None, within: float) -> AmqpConnection:
        scheme, host, port = endpoint.scheme, endpoint.host, endpoint.port
        if not self._guard.restricted:
            return await AmqpConnection(f"{scheme}://{host}:{port}", credential).open(within)
        addresses = await self._guard.addresses(host, port, role="AMQP container")
        name = None if parse_address(host) is not None else host
        failure: TargetUnreachable | None = None
        for address in addresses:
            netloc = f"[{address}]" if address.version == 6 else str(address)
            try:
                return await AmqpConnection(
                    f"{scheme}://{netloc}:{port}", credential, virtual_host=name
                ).open(within)
            except TargetUnreachable as exc:  # try the name's next address
                failure = exc
        raise failure or TargetUnreachable(f"AMQP container {host} has no address")

    @staticmethod
    async def _close(connection: AmqpConnection) -> None:
        await connection.close()

    async def aclose(self) -> None:
        """Close every connection."""
        await self._pool.aclose()
