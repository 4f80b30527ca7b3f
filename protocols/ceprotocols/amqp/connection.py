"""One AMQP 1.0 connection (python-qpid-proton ``BlockingConnection``) bridged to asyncio.

proton's blocking API is not thread-safe, so every call on a connection runs on that
connection's own single worker thread, in order; the event loop awaits the results. Sending
links are opened once per (address, link name, settlement mode, link properties) and reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from proton import (
    ConnectionException,
    Delivery,
    Link,
    LinkException,
    Message,
    ProtonException,
    Sender,
    Timeout,
    symbol,
)
from proton import timestamp as amqp_timestamp
from proton.reactor import AtLeastOnce, AtMostOnce, LinkOption
from proton.utils import BlockingConnection, BlockingSender, LinkDetached, SendException

from ceprotocols.amqp import wire
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


#: Most messages written before their outcomes are awaited together.
_GROUP = 64


@dataclass(slots=True)
class _OpenLink:
    """A sending link and what each message on it needs, looked up once when it opened: the
    proton link, whether the link settles messages when they are sent, and its delivery tags."""

    blocking: BlockingSender
    link: Sender
    settles_at_once: bool
    #: The link's delivery tags: 1, 2, 3... as proton's own ``delivery_tag()`` makes them (a
    #: tag must be unique among the link's unsettled deliveries), without its per-call lookup
    #: of the generator through the link's attribute record.
    tags: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def tag(self) -> str:
        """The next delivery tag."""
        return str(next(self.tags))


class _Send(NamedTuple):  # (a tuple: one is made for every message)
    settings: AmqpSettings
    #: The encoded message (:mod:`.wire`), or proton's for what that does not encode.
    message: bytes | Message
    within: float
    future: asyncio.Future[None]


def _all_settled(deliveries: list[Delivery]) -> Callable[[], bool]:
    """The wait condition "every one of ``deliveries`` is settled", checked after every event
    the connection processes: settled deliveries are dropped from the end of the list (they
    stay settled), so each check asks one unsettled delivery, not every one of them (each
    question is a call through proton's bindings)."""
    pending = list(deliveries)

    def settled() -> bool:
        while pending and pending[-1].settled:
            pending.pop()
        return not pending

    return settled


class AmqpConnection:
    """A blocking proton connection driven from asyncio through one worker thread.

    ``virtual_host`` is the host name to announce in the AMQP ``open`` frame and to use for TLS
    (SNI and the certificate check) when ``url`` names the container by address: the sender
    connects to the address it checked against its network policy but keeps the sink's name.
    """

    def __init__(self, url: str, credential: Credential | None, *, virtual_host: str | None = None) -> None:
        self.url = url
        self._credential = credential
        self._virtual_host = virtual_host
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amqp")
        self._connection: BlockingConnection | None = None
        self._links: dict[_LinkKey, _OpenLink] = {}
        self._queue: list[_Send] = []
        self._pump: asyncio.Task[None] | None = None
        self.broken = False

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self, within: float) -> AmqpConnection:
        """Connect (SASL PLAIN with a PLAIN credential, else ANONYMOUS)."""
        try:
            await self._run(self._connect, within)
        except (ProtonException, OSError) as exc:
            await self.close()
            if "unauthorized-access" in str(exc) or "sasl" in str(exc).lower():
                raise DeliveryRejected(
                    f"AMQP {self.url} refused the credentials: {exc}", status="unauthorized", retryable=False
                ) from exc
            raise TargetUnreachable(f"AMQP connect to {self.url} failed: {exc}") from exc
        return self

    def _connect(self, within: float) -> None:
        options: dict[str, Any] = {}
        if isinstance(self._credential, Plain):
            options.update(user=self._credential.identifier, password=self._credential.secret)
            options["allowed_mechs"] = "PLAIN"
        if self._virtual_host is not None:
            options["virtual_host"] = self._virtual_host
        self._connection = BlockingConnection(self.url, timeout=within, reconnect=False, **options)

    async def send(self, settings: AmqpSettings, message: AmqpMessage, within: float) -> None:
        """Send on the settings' link; return once settled (``accepted`` for unsettled links).

        Concurrent sends are written together and their outcomes awaited together (one round
        trip for the group instead of one per message); each send still gets its own outcome.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Send(settings, wire.encode(message) or to_proton(message), within, future))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._drain())
        await future

    async def _drain(self) -> None:
        while self._queue:
            # Let the sends that are on their way join this group: when a group settles, its
            # deliveries' successors reach send() over the next few turns of the loop, and a
            # group taken at once would hold only the first of them (one round trip each).
            size = 0
            while size != len(self._queue) < _GROUP:
                size = len(self._queue)
                await asyncio.sleep(0)
            group, self._queue = self._queue[:_GROUP], self._queue[_GROUP:]
            try:
                outcomes = await self._run(self._send_group, group)
            except (ProtonException, OSError) as exc:
                outcomes = [exc] * len(group)
            for item, outcome in zip(group, outcomes, strict=True):
                if item.future.done():
                    continue
                if outcome is None:
                    item.future.set_result(None)
                else:
                    error = translate(outcome, f"AMQP {self.url}{item.settings.address}")
                    if isinstance(outcome, ConnectionException | LinkException | OSError) or isinstance(
                        error, TargetUnreachable
                    ):
                        self.broken = True
                    item.future.set_exception(error)

    def _link(self, settings: AmqpSettings) -> _OpenLink:
        if self._connection is None:
            raise ConnectionException("connection closed")
        key: _LinkKey = (settings.address, settings.link_name, settings.settled, settings.link_properties)
        found = self._links.get(key)
        if found is None:
            options: list[Any] = [AtMostOnce() if settings.settled else AtLeastOnce()]
            if settings.link_properties:
                options.append(_LinkProperties(settings.link_properties))
            blocking = self._connection.create_sender(
                settings.address, name=settings.link_name, options=options
            )
            link = blocking.link
            if not isinstance(link, Sender):  # (create_sender makes a sending link)
                raise LinkException(f"{settings.address}: not a sending link")
            found = _OpenLink(blocking, link, link.snd_settle_mode == Link.SND_SETTLED)
            self._links[key] = found
        return found

    def _send_group(self, group: list[_Send]) -> list[Exception | None]:
        """Worker thread: send every message of the group, then wait until all are settled."""
        if self._connection is None:
            raise ConnectionException("connection closed")
        outcomes: list[Exception | None] = [None] * len(group)
        # The deliveries the peer settles (links in at-least-once mode): on an at-most-once link
        # a message is settled when sent, and its outcome is None at once.
        deliveries: list[tuple[int, Delivery]] = []
        # The sends of a group mostly share one destination's settings: its link is looked up
        # once for them.
        settings: AmqpSettings | None = None
        opened: _OpenLink | None = None
        for i, item in enumerate(group):
            try:
                if opened is None or item.settings is not settings:
                    settings, opened = item.settings, self._link(item.settings)
                link = opened.link
                if isinstance(item.message, Message):
                    sent = item.message.send(link, tag=opened.tag())
                    # (proton returns a byte count only for raw bytes)
                    if isinstance(sent, Delivery) and not opened.settles_at_once:
                        deliveries.append((i, sent))
                    continue
                # What Message.send does, with the message encoded already.
                delivery = link.delivery(opened.tag())
                link.stream(item.message)
                link.advance()
                if opened.settles_at_once:
                    delivery.settle()
                else:
                    deliveries.append((i, delivery))
            except LinkDetached as exc:
                self._forget_link(item.settings)
                opened = None  # the next send on these settings opens the link again
                outcomes[i] = exc
        within = max((item.within for item in group), default=10.0)
        try:
            self._connection.wait(
                _all_settled([d for _, d in deliveries]), msg="settling sent messages", timeout=within
            )
        except Timeout as exc:
            for i, delivery in deliveries:
                if not delivery.settled:
                    outcomes[i] = exc
        except LinkDetached as exc:
            for i, delivery in deliveries:
                if not delivery.settled:
                    outcomes[i] = exc
            self._forget_link(group[0].settings)
        for i, delivery in deliveries:
            if outcomes[i] is not None:
                continue
            delivery.settle()
            if delivery.remote_state != Delivery.ACCEPTED:
                outcomes[i] = SendException(delivery.remote_state)
        return outcomes

    def _forget_link(self, settings: AmqpSettings) -> None:
        self._links.pop(
            (settings.address, settings.link_name, settings.settled, settings.link_properties), None
        )

    async def close(self) -> None:
        """Close the connection and its worker thread; sends still queued fail as unreachable."""
        for item in self._queue:
            if not item.future.done():
                item.future.set_exception(TargetUnreachable(f"AMQP connection to {self.url} closed"))
        self._queue.clear()
        connection, self._connection = self._connection, None
        self._links.clear()
        if connection is not None:
            # Closing a dead connection fails, and then there is nothing left to release.
            with contextlib.suppress(ProtonException, OSError):
                await self._run(connection.close)
        self._executor.shutdown(wait=False)
