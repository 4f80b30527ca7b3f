"""One AMQP 1.0 connection (python-qpid-proton ``BlockingConnection``) bridged to asyncio.

proton's blocking API is not thread-safe, so every call on a connection runs on that
connection's own single worker thread, in order; the event loop awaits the results. Sending
links are opened once per (address, link name, settlement mode, link properties) and reused.
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from proton import (
    ConnectionException,
    Delivery,
    Link,
    LinkException,
    Message,
    ProtonException,
    Timeout,
    symbol,
)
from proton import timestamp as amqp_timestamp
from proton.reactor import AtLeastOnce, AtMostOnce, LinkOption
from proton.utils import BlockingConnection, BlockingSender, LinkDetached, SendException

from ceprotocols.amqp.binding import AmqpMessage, Timestamp
from ceprotocols.amqp.settings import AmqpSettings
from ceprotocols.credentials import Credential, Plain
from ceprotocols.errors import DeliveryError, DeliveryRejected, DeliveryTimeout, TargetUnreachable

T = TypeVar("T")

_LinkKey = tuple[str, str | None, bool, tuple[tuple[str, str], ...]]


class _LinkProperties(LinkOption):
    """Copies the subscription's ``linkproperties`` into the attach frame."""

    def __init__(self, properties: tuple[tuple[str, str], ...]) -> None:
        self.properties: dict[symbol, Any] = {symbol(k): v for k, v in properties}

    def apply(self, link: Link) -> None:
        link.properties = self.properties


def to_proton(message: AmqpMessage) -> Message:
    """The proton message for a bound CloudEvent: one data section, native property types."""
    properties = {
        name: amqp_timestamp(value.millis) if isinstance(value, Timestamp) else value
        for name, value in message.application_properties.items()
    }
    result = Message(
        body=message.body or b"",
        inferred=True,  # a bytes body goes out as a data section, not an amqp-value
        properties=properties or None,
    )
    if message.content_type is not None:
        result.content_type = message.content_type
    return result


def from_proton(message: Message) -> AmqpMessage:
    """The binding's view of a received proton message (data section or amqp-value body)."""
    body: Any = message.body
    if isinstance(body, memoryview | bytearray):
        body = bytes(body)
    elif isinstance(body, str):
        body = body.encode()
    elif body is not None and not isinstance(body, bytes):
        raise DeliveryRejected("AMQP body is neither a data section nor a string", retryable=False)
    # proton reports an absent content-type as the symbol "None"; no media type lacks a "/".
    content_type = str(message.content_type) if message.content_type else None
    return AmqpMessage(
        content_type=content_type if content_type and "/" in content_type else None,
        application_properties=dict(message.properties or {}),
        body=body or None,
    )


def translate(exc: Exception, where: str) -> DeliveryError:
    """The DeliveryError for a proton exception."""
    if isinstance(exc, SendException):
        state = exc.state
        if state == Delivery.REJECTED:
            return DeliveryRejected(f"{where} rejected the message", status="rejected", retryable=False)
        if state == Delivery.MODIFIED:
            return DeliveryRejected(
                f"{where} modified (did not accept) the message", status="modified", retryable=True
            )
        return DeliveryRejected(f"{where} released the message", status="released", retryable=True)
    if isinstance(exc, Timeout):
        return DeliveryTimeout(f"{where} did not settle the message in time")
    if isinstance(exc, LinkDetached) and exc.condition in ("amqp:not-found", "amqp:unauthorized-access"):
        return DeliveryRejected(f"{where}: {exc}", status=exc.condition, retryable=False)
    return TargetUnreachable(f"{where}: {exc}")


class AmqpConnection:
    """A blocking proton connection driven from asyncio through one worker thread."""

    def __init__(self, url: str, credential: Credential | None) -> None:
        self.url = url
        self._credential = credential
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amqp")
        self._connection: BlockingConnection | None = None
        self._links: dict[_LinkKey, BlockingSender] = {}
        self.broken = False

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self, within: float) -> AmqpConnection:
        """Connect (SASL PLAIN with a PLAIN credential, else ANONYMOUS)."""
        try:
            await self._run(self._connect, within)
        except (ProtonException, OSError) as exc:
            await self.close()
            raise TargetUnreachable(f"AMQP connect to {self.url} failed: {exc}") from exc
        return self

    def _connect(self, within: float) -> None:
        options: dict[str, Any] = {}
        if isinstance(self._credential, Plain):
            options.update(user=self._credential.identifier, password=self._credential.secret)
            options["allowed_mechs"] = "PLAIN"
        self._connection = BlockingConnection(self.url, timeout=within, reconnect=False, **options)

    async def send(self, settings: AmqpSettings, message: AmqpMessage, within: float) -> None:
        """Send on the settings' link; return once settled (``accepted`` for unsettled links)."""
        try:
            await self._run(self._send, settings, to_proton(message), within)
        except (ProtonException, OSError) as exc:
            error = translate(exc, f"AMQP {self.url}{settings.address}")
            if isinstance(exc, ConnectionException | LinkException | OSError) or isinstance(
                error, TargetUnreachable
            ):
                self.broken = True
            raise error from exc

    def _send(self, settings: AmqpSettings, message: Message, within: float) -> None:
        if self._connection is None:
            raise ConnectionException("connection closed")
        key: _LinkKey = (settings.address, settings.link_name, settings.settled, settings.link_properties)
        link = self._links.get(key)
        if link is None:
            options: list[Any] = [AtMostOnce() if settings.settled else AtLeastOnce()]
            if settings.link_properties:
                options.append(_LinkProperties(settings.link_properties))
            link = self._connection.create_sender(settings.address, name=settings.link_name, options=options)
            self._links[key] = link
        try:
            link.send(
                message,
                timeout=within,
                error_states=[Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED],
            )
        except LinkDetached:
            self._links.pop(key, None)
            raise

    async def close(self) -> None:
        """Close the connection and its worker thread."""
        connection, self._connection = self._connection, None
        self._links.clear()
        if connection is not None:
            # Closing a dead connection fails, and then there is nothing left to release.
            with contextlib.suppress(ProtonException, OSError):
                await self._run(connection.close)
        self._executor.shutdown(wait=False)
