"""MQTT ingress: subscribe to a topic filter and hand each PUBLISH over as a CloudEvent.

Source: ``mqtt://host[:1883]/<topic filter>[?qos=1&version=5&clientid=...]`` (``mqtts://`` for
TLS; ``#`` and ``+`` wildcards are allowed in the path). With QoS 1/2 the client acknowledges
manually (paho ``manual_ack``): a message is acknowledged only after the callback stored it.
MQTT has no negative acknowledgement, so an invalid message is counted, logged and acknowledged.
The session is clean: what is published while the source is disconnected is not kept for it
(``?clientid=`` only fixes the client identifier).
"""

from __future__ import annotations

import asyncio
import logging
import queue
from typing import Any

import paho.mqtt.client as paho

from ceprotocols.endpoint import Endpoint
from ceprotocols.errors import DeliveryError, SettingsError
from ceprotocols.mqtt import binding
from ceprotocols.mqtt.connection import MqttConnection
from ceprotocols.receiver import RETRY_PAUSE, Decoded, Handover, OnEvents, ReceiverStats, decode

log = logging.getLogger("ceprotocols.mqtt")

#: Messages waiting for the callback; when full, paho's network thread waits (back pressure).
BUFFER = 1000
BATCH = 100


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

    def __init__(self, source: str, endpoint: Endpoint) -> None:
        self.source = source
        self.endpoint = endpoint
        self.topic = endpoint.path.lstrip("/")
        if not self.topic:
            raise SettingsError("source", f"{source}: the path must be a topic filter")
        try:
            self.qos = int(endpoint.option("qos", "1") or "1")
            self.v5 = (endpoint.option("version", "5") or "5") != "3"
        except ValueError as exc:
            raise SettingsError("source", f"{source}: qos must be 0, 1 or 2") from exc
        if self.qos not in (0, 1, 2):
            raise SettingsError("source", f"{source}: qos must be 0, 1 or 2")
        self.stats = ReceiverStats()
        self._buffer: queue.Queue[paho.MQTTMessage] = queue.Queue(BUFFER)
        self._connection: MqttConnection | None = None
        self._closed = False

    async def run(self, on_events: OnEvents) -> None:
        """Connect, subscribe, and hand messages over until closed."""
        handover = Handover(self.source, self.stats)
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
                client_id=self.endpoint.option("clientid"),
            )
            self._connection = await connection.open(10.0)
            await self._connection.subscribe(self.topic, self.qos, 10.0)
            self.stats.subscribed = True
        return self._connection

    async def _consume(self, connection: MqttConnection, handover: Handover, on_events: OnEvents) -> None:
        while not self._closed:
            first = await asyncio.to_thread(self._next, 0.5)
            if first is None:
                continue
            messages = [first]
            while len(messages) < BATCH and (more := self._next(0)) is not None:
                messages.append(more)
            decoded: list[Decoded] = [decode(binding.from_message, to_message(m)) for m in messages]
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
