"""One AMQP 1.0 connection (python-qpid-proton's engine) on the event loop.

Messages are written on the connection's links from the event loop itself (no thread, no
reactor: see :mod:`.engine`); the sends of one turn of the loop go out in one write, and each
send's outcome is read from its delivery once the peer has settled it. Sending links are opened
once per (address, link name, settlement mode, link properties) and reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from proton import Delivery, Endpoint, Link, Message, ProtonException, Sender, symbol
from proton import timestamp as amqp_timestamp

from ceprotocols.amqp import deliveries, wire
from ceprotocols.amqp.binding import AmqpMessage, Timestamp
from ceprotocols.amqp.engine import ProtonStream, StreamClosed
from ceprotocols.amqp.settings import SCHEMES, AmqpSettings
from ceprotocols.credentials import Credential
from ceprotocols.errors import DeliveryError, DeliveryRejected, DeliveryTimeout, TargetUnreachable

_LinkKey = tuple[str, str | None, bool, tuple[tuple[str, str], ...]]

#: A link detached with one of these conditions will refuse a retry in the same way.
_FINAL_CONDITIONS = ("amqp:not-found", "amqp:unauthorized-access")


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


def outcome_error(state: int, where: str) -> DeliveryRejected:
    """The error for a delivery the peer settled with an outcome other than ``accepted``."""
    if state == Delivery.REJECTED:
        return DeliveryRejected(f"{where} rejected the message", status="rejected", retryable=False)
    if state == Delivery.MODIFIED:
        return DeliveryRejected(
            f"{where} modified (did not accept) the message", status="modified", retryable=True
        )
    return DeliveryRejected(f"{where} released the message", status="released", retryable=True)


class _Unsettled(NamedTuple):  # (a tuple: one is made for every message)
    delivery: deliveries.Handle
    future: asyncio.Future[None]
    deadline: float


@dataclass(slots=True)
class _OpenLink:
    """A sending link and what each message on it needs, looked up once when it opened."""

    settings: AmqpSettings
    link: Sender
    #: Whether the link settles messages when they are sent (``sendersettlementmode=settled``).
    settles_at_once: bool
    #: The deliveries awaiting the peer's settlement, in the order they were sent.
    unsettled: deque[_Unsettled] = field(default_factory=deque)
    #: Sends on a link settled when sent, waiting for the peer's credit.
    credit_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    #: The link's delivery tags: 1, 2, 3... as proton's own ``delivery_tag()`` makes them (a tag
    #: must be unique among the link's unsettled deliveries).
    tags: Iterator[int] = field(default_factory=lambda: itertools.count(1))


class AmqpConnection:
    """An AMQP connection on the event loop, with its sending links.

    ``virtual_host`` is the host name to announce in the AMQP ``open`` frame and to use for TLS
    (SNI and the certificate check) when ``url`` names the container by address: the sender
    connects to the address it checked against its network policy but keeps the sink's name.
    """

    def __init__(self, url: str, credential: Credential | None, *, virtual_host: str | None = None) -> None:
        self.url = url
        self._credential = credential
        self._virtual_host = virtual_host
        self._stream: ProtonStream | None = None
        self._opened: asyncio.Future[None] | None = None
        self._links: dict[_LinkKey, _OpenLink] = {}
        self._last: tuple[AmqpSettings, _OpenLink] | None = None
        #: Unnamed links are named container-address-n: a link's name is unique on its connection.
        self._names = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.broken = False

    async def open(self, within: float) -> AmqpConnection:
        """Connect (SASL PLAIN with a PLAIN credential, else ANONYMOUS)."""
        loop = asyncio.get_running_loop()
        parts = urlsplit(self.url)
        scheme, host = parts.scheme, parts.hostname or ""
        port = parts.port or SCHEMES.get(scheme, 5672)
        self._opened = loop.create_future()
        try:
            stream = ProtonStream(
                tls=scheme == "amqps",
                host=self._virtual_host or host,
                credential=self._credential,
                on_input=self._input,
                on_lost=self._lost,
            )
            self._stream = stream
            async with asyncio.timeout(within):
                await loop.create_connection(lambda: stream, host, port)
                await self._opened
        except (StreamClosed, OSError, TimeoutError) as exc:
            if not self._opened.done():
                self._opened.cancel()  # (nobody will wait for it now)
            await self.close()
            text = str(exc) or "no answer in time"
            if "unauthorized-access" in text or "sasl" in text.lower():
                raise DeliveryRejected(
                    f"AMQP {self.url} refused the credentials: {text}", status="unauthorized", retryable=False
                ) from exc
            raise TargetUnreachable(f"AMQP connect to {self.url} failed: {text}") from exc
        return self

    async def send(self, settings: AmqpSettings, message: AmqpMessage, within: float) -> None:
        """Send on the settings' link; return once settled (``accepted`` for unsettled links).

        The sends of one turn of the event loop are written together (one round trip for them
        instead of one per message); each send still gets its own outcome.
        """
        stream = self._stream
        if stream is None or stream.closed is not None:
            self.broken = True
            raise TargetUnreachable(f"AMQP connection to {self.url} closed")
        last = self._last
        opened = last[1] if last is not None and last[0] is settings else self._link(stream, settings)
        payload = wire.encode(message) or to_proton(message).encode()
        link = opened.link
        if opened.settles_at_once and link.credit <= 0:
            # A message settled when sent is done once written: it waits for the peer's credit
            # (the link's attach), so that it is not left in proton's buffer when it returns.
            stream.flush_soon()  # (the attach)
            await self._credit(opened, within)
        try:
            delivery = deliveries.start(link, str(next(opened.tags)))
            link.stream(payload)
            deliveries.advance(link)
        except ProtonException as exc:
            self.broken = True
            raise TargetUnreachable(f"AMQP {self.url}{settings.address}: {exc}") from exc
        stream.flush_soon()
        if opened.settles_at_once:
            deliveries.settle(delivery)
            return
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        deadline = loop.time() + within
        opened.unsettled.append(_Unsettled(delivery, future, deadline))
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)
        await future

    async def _credit(self, opened: _OpenLink, within: float) -> None:
        waiter = asyncio.get_running_loop().create_future()
        opened.credit_waiters.append(waiter)
        try:
            async with asyncio.timeout(within):
                await waiter
        except TimeoutError as exc:
            raise DeliveryTimeout(f"AMQP {self.url}{opened.settings.address} gave no credit in time") from exc
        if (
            self._stream is None
            or self._stream.closed is not None
            or opened.link.state & Endpoint.LOCAL_CLOSED
        ):
            raise TargetUnreachable(
                f"AMQP {self.url}{opened.settings.address}: the link or connection closed"
            )

    def _link(self, stream: ProtonStream, settings: AmqpSettings) -> _OpenLink:
        key: _LinkKey = (settings.address, settings.link_name, settings.settled, settings.link_properties)
        found = self._links.get(key)
        if found is None:
            name = (
                settings.link_name or f"{stream.connection.container}-{settings.address}-{next(self._names)}"
            )
            link = stream.session.sender(name)
            link.target.address = settings.address
            if settings.settled:  # at most once: settled when sent
                link.snd_settle_mode = Link.SND_SETTLED
            else:  # at least once: the peer settles each message with its outcome
                link.snd_settle_mode = Link.SND_UNSETTLED
                link.rcv_settle_mode = Link.RCV_FIRST
            if settings.link_properties:
                link.properties = {symbol(k): v for k, v in settings.link_properties}
            link.open()
            found = _OpenLink(settings, link, settings.settled)
            self._links[key] = found
        self._last = (settings, found)
        return found

    # What the peer said (after each read)

    def _input(self) -> None:
        opened = self._opened
        stream = self._stream
        if (
            opened is not None
            and not opened.done()
            and stream is not None
            and stream.connection.state & Endpoint.REMOTE_ACTIVE
        ):
            opened.set_result(None)
        detached: list[_OpenLink] = []
        for link in self._links.values():
            unsettled = link.unsettled
            # A peer mostly settles a link's deliveries in the order they were sent (RabbitMQ's
            # dispositions name ranges of them): the settled ones are taken from the front,
            # without asking the others. When the front is not settled, the others are looked
            # at: a delivery settled out of order is not kept waiting for those before it.
            if unsettled:
                if deliveries.settled(unsettled[0].delivery):
                    while unsettled and deliveries.settled(unsettled[0].delivery):
                        self._settled(link, unsettled.popleft())
                else:
                    self._sweep(link, None)
            if link.link.state & Endpoint.REMOTE_CLOSED:
                detached.append(link)
            elif link.credit_waiters and link.link.credit > 0:
                self._wake(link)
        for link in detached:
            self._detached(link)

    def _settled(self, link: _OpenLink, item: _Unsettled) -> None:
        delivery = item.delivery
        state = deliveries.remote_state(delivery)
        deliveries.settle(delivery)
        if item.future.done():  # (the send was cancelled)
            return
        if state == Delivery.ACCEPTED:
            item.future.set_result(None)
        else:
            item.future.set_exception(outcome_error(state, f"AMQP {self.url}{link.settings.address}"))

    def _detached(self, link: _OpenLink) -> None:
        """The peer detached a link: its unsettled messages fail, the connection is given up."""
        condition = link.link.remote_condition
        where = f"AMQP {self.url}{link.settings.address}"
        error: DeliveryError
        if condition is not None and condition.name in _FINAL_CONDITIONS:
            error = DeliveryRejected(
                f"{where}: the link was detached: {condition.name}: {condition.description}",
                status=condition.name,
                retryable=False,
            )
        else:
            reason = f"{condition.name}: {condition.description}" if condition is not None else "by the peer"
            error = TargetUnreachable(f"{where}: the link was detached: {reason}")
        self._fail(link, error)
        self._links = {k: v for k, v in self._links.items() if v is not link}
        self._last = None
        self.broken = True
        with contextlib.suppress(ProtonException):
            link.link.close()

    @staticmethod
    def _wake(link: _OpenLink) -> None:
        waiters, link.credit_waiters = link.credit_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _fail(self, link: _OpenLink, error: DeliveryError) -> None:
        self._wake(link)  # (they find the link or the connection gone)
        while link.unsettled:
            item = link.unsettled.popleft()
            if not item.future.done():
                item.future.set_exception(error)

    def _lost(self, reason: StreamClosed) -> None:
        """The connection ended: every unsettled message fails (the pipeline sends it again)."""
        self.broken = True
        if self._opened is not None and not self._opened.done():
            self._opened.set_exception(reason)
        error = TargetUnreachable(f"AMQP {self.url}: {reason} before the peer settled the message")
        for link in self._links.values():
            self._fail(link, error)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # Deadlines: one timer for the earliest, not one per message

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = asyncio.get_running_loop().call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Fail the messages past their deadline; arm for the next deadline."""
        self._timer = None
        now = asyncio.get_running_loop().time()
        earliest: float | None = None
        for link in self._links.values():
            next_deadline = self._sweep(link, now)
            if next_deadline is not None and (earliest is None or next_deadline < earliest):
                earliest = next_deadline
        if self._stream is not None:
            self._stream.flush_soon()
        if earliest is not None:
            self._arm(earliest)

    def _sweep(self, link: _OpenLink, now: float | None) -> float | None:
        """Take the outcomes of the link's settled deliveries, wherever they are in its
        order; with ``now``, fail those past their deadline too. The earliest deadline left."""
        kept: deque[_Unsettled] = deque()
        earliest: float | None = None
        for item in link.unsettled:
            if deliveries.settled(item.delivery):
                self._settled(link, item)
            elif now is not None and item.deadline <= now:
                deliveries.settle(item.delivery)  # (its outcome no longer counts)
                if not item.future.done():
                    item.future.set_exception(
                        DeliveryTimeout(
                            f"AMQP {self.url}{link.settings.address} did not settle the message in time"
                        )
                    )
            else:
                kept.append(item)
                if earliest is None or item.deadline < earliest:
                    earliest = item.deadline
        link.unsettled = kept
        return earliest

    async def close(self) -> None:
        """Close the connection; messages not yet settled fail as unreachable."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        else:
            self._lost(StreamClosed("connection closed"))
        self._links.clear()
        self._last = None
