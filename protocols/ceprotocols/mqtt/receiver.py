"""MQTT ingress: subscribe to a topic filter and hand each PUBLISH over as a CloudEvent.

Source: ``mqtt://host[:1883]/<topic filter>[?qos=1&version=5&clientid=...]`` (``mqtts://`` for
TLS; ``#`` and ``+`` wildcards are allowed in the path). With QoS 1/2 the client acknowledges
manually (paho ``manual_ack``): a message is acknowledged only after the callback stored it.
MQTT has no negative acknowledgement, so an invalid message is counted, logged and acknowledged.

By default the session is clean: what is published while the source is disconnected is not kept
for it. ``?session=persistent&clientid=<fixed id>`` asks the server to keep the session (MQTT 5:
for ``?expiry=`` seconds, default one day; MQTT 3.1.1: until a clean connect), so that QoS 1/2
messages published meanwhile are delivered when the source comes back: at-least-once across
restarts.
"""

from __future__ import annotations

import asyncio
import logging
import queue
from typing import Any

import paho.mqtt.client as paho

from ceprotocols.endpoint import Endpoint, redact
from ceprotocols.errors import DeliveryError, SettingsError
from ceprotocols.mqtt import binding
from ceprotocols.mqtt.connection import MqttConnection
from ceprotocols.receiver import (
    RETRY_PAUSE,
    Decoded,
    Handover,
    Limits,
    OnEvents,
    OnReject,
    RawMessage,
    ReceiverStats,
    decode,
    trace_of,
)
from ceprotocols.tracecontext import TraceContext

log = logging.getLogger("ceprotocols.mqtt")

#: Messages waiting for the callback; when full, paho's network thread waits (back pressure).
BUFFER = 1000
BATCH = 100
#: Session expiry of a persistent MQTT 5 session unless ``?expiry=`` says otherwise: one day.
DEFAULT_EXPIRY = 86_400


def decode_message(msg: paho.MQTTMessage) -> dict[str, Any]:
    """A received PUBLISH as a CloudEvent (raises for anything that is not one)."""
    return binding.from_message(to_message(msg))


def message_trace(msg: paho.MQTTMessage) -> TraceContext | None:
    """The PUBLISH's ``traceparent``/``tracestate`` user properties (MQTT 5; in binary mode the
    same properties are also the event's attributes)."""
    return trace_of(getattr(getattr(msg, "properties", None), "UserProperty", None) or ())


def raw_message(msg: paho.MQTTMessage) -> RawMessage:
    """What is kept of a refused PUBLISH: payload, content type and user properties."""
    properties = getattr(msg, "properties", None)
    headers: list[tuple[str, Any]] = [("topic", msg.topic)]
    content_type = getattr(properties, "ContentType", None)
    if content_type is not None:
        headers.append(("content-type", content_type))
    headers += list(getattr(properties, "UserProperty", None) or ())
    return RawMessage.of(bytes(msg.payload), headers)


def to_message(msg: paho.MQTTMessage) -> binding.MqttMessage:
    """The binding's view of a received PUBLISH (MQTT 5 properties when present)."""
    properties = getattr(msg, "properties", None)
    return binding.MqttMessage(
        payload=bytes(msg.payload),
        content_type=getattr(properties, "ContentType", None),
        user_properties=tuple(getattr(properties, "UserProperty", None) or ()),
    )


class MqttReceiver:
    """Consumes one MQTT topic filter."""

    def __init__(self, source: str, endpoint: Endpoint, limits: Limits | None = None) -> None:
        self.source = redact(source)
        self.endpoint = endpoint
        self.limits = limits or Limits()
        self.topic = endpoint.path.lstrip("/")
        if not self.topic:
            raise SettingsError("source", f"{redact(source)}: the path must be a topic filter")
        try:
            self.qos = int(endpoint.option("qos", "1") or "1")
            self.v5 = (endpoint.option("version", "5") or "5") != "3"
        except ValueError as exc:
            raise SettingsError("source", f"{redact(source)}: qos must be 0, 1 or 2") from exc
        if self.qos not in (0, 1, 2):
            raise SettingsError("source", f"{self.source}: qos must be 0, 1 or 2")
        self.client_id = endpoint.option("clientid")
        self.session_expiry = self._session(endpoint)
        self.stats = ReceiverStats()
        self._buffer: queue.Queue[paho.MQTTMessage] = queue.Queue(BUFFER)
        self._connection: MqttConnection | None = None
        self._closed = False

    def _session(self, endpoint: Endpoint) -> int | None:
        """The session expiry of a persistent session, or None for a clean one."""
        session = endpoint.option("session", "clean")
        if session == "clean":
            return None
        if session != "persistent":
            raise SettingsError("source", f"{self.source}: session must be clean or persistent")
        if not self.client_id:
            raise SettingsError(
                "source", f"{self.source}: a persistent session needs a fixed client id (clientid=...)"
            )
        if self.qos == 0:
            raise SettingsError("source", f"{self.source}: a persistent session needs qos 1 or 2")
        text = endpoint.option("expiry", str(DEFAULT_EXPIRY)) or ""
        if not text.isdigit() or not 0 < int(text) < 2**32:
            raise SettingsError("source", f"{self.source}: expiry must be seconds from 1 to 4294967295")
        return int(text)

    async def run(self, on_events: OnEvents, on_reject: OnReject | None = None) -> None:
        """Connect, subscribe, and hand messages over until closed."""
        handover = Handover(self.source, self.stats, on_reject)
        while not self._closed:
            try:
                connection = await self._connect()
                await self._consume(connection, handover, on_events)
            except DeliveryError as exc:
                log.warning("source %s: %s; reconnecting", self.source, exc)
                self.stats.reconnects += 1
                await self._drop_connection()
                await asyncio.sleep(RETRY_PAUSE)

    async def _connect(self) -> MqttConnection:
        if self._connection is None:
            connection = MqttConnection(
                self.endpoint.host,
                self.endpoint.port,
                v5=self.v5,
                tls=self.endpoint.tls,
                on_message=self._put,
                manual_ack=True,
                client_id=self.client_id,
                session_expiry=self.session_expiry,
            )
            self._connection = await connection.open(10.0)
            await self._connection.subscribe(self.topic, self.qos, 10.0)
            self.stats.subscribed = True
        return self._connection

    async def _consume(self, connection: MqttConnection, handover: Handover, on_events: OnEvents) -> None:
        while not self._closed:
            first = await asyncio.to_thread(self._next, 0.5)
            self.stats.alive()
            # paho reconnects by itself: while it does, the source is not consuming.
            self.stats.subscribed = connection.connected
            if first is None:
                continue
            messages = [first]
            while len(messages) < BATCH and (more := self._next(0)) is not None:
                messages.append(more)
            decoded: list[Decoded] = [
                decode(decode_message, m, raw_message, self.limits, message_trace) for m in messages
            ]
            await handover(decoded, on_events)
            for message in messages:
                if message.qos > 0:  # acknowledged only now that the callback has it
                    connection.ack(message.mid, message.qos)

    def _put(self, message: paho.MQTTMessage) -> None:
        # paho's network thread: wait while the buffer is full (back pressure), until closed.
        while not self._closed:
            try:
                self._buffer.put(message, timeout=0.5)
                return
            except queue.Full:
                continue

    def _next(self, within: float) -> Any:
        try:
            return self._buffer.get(timeout=within) if within else self._buffer.get_nowait()
        except queue.Empty:
            return None

    async def _drop_connection(self) -> None:
        self.stats.subscribed = False
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def aclose(self) -> None:
        """Stop consuming and disconnect."""
        self._closed = True
        await self._drop_connection()
