"""Test consumers that read what a sender delivered from a real server, decoded both with our
bindings and kept raw (for decoding with the official SDK where it has the binding)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from ceprotocols.amqp import binding as amqp_binding
from ceprotocols.amqp.connection import from_proton
from ceprotocols.kafka import binding as kafka_binding
from ceprotocols.mqtt import binding as mqtt_binding
from ceprotocols.nats import binding as nats_binding
from support.sinks import Sink


@dataclass
class Received:
    """One delivered message: the raw binding message and the event decoded from it."""

    raw: Any
    event: dict[str, Any]


class Consumer:
    """Collects messages in a thread-safe way and hands them out on the event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Received] = asyncio.Queue()

    def put_threadsafe(self, item: Received) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def receive(self, count: int = 1, within: float = 15.0) -> list[Received]:
        """The next ``count`` messages; fails the test if they do not come in time."""
        items: list[Received] = []
        async with asyncio.timeout(within):
            while len(items) < count:
                items.append(await self._queue.get())
        return items

    async def close(self) -> None:
        raise NotImplementedError


class MqttConsumer(Consumer):
    """With ``session`` (MQTT 3.1.1 only), a persistent session under that client id: the broker
    queues QoS 1 messages while the consumer is away, and paho reconnects by itself."""

    def __init__(self, host: str, port: int, topic: str, *, v5: bool, session: str | None = None) -> None:
        super().__init__()
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        self._subscribed = threading.Event()
        if session:
            self._client = paho.Client(
                CallbackAPIVersion.VERSION2, client_id=session, clean_session=False, protocol=paho.MQTTv311
            )
            self._client.reconnect_delay_set(1, 1)
        else:
            self._client = paho.Client(
                CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5 if v5 else paho.MQTTv311
            )
        self._client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        self._client.on_subscribe = lambda c, u, mid, rcs, p: self._subscribed.set()
        self._client.on_message = self._on_message
        self._client.connect(host, port)
        self._client.loop_start()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        props = getattr(msg, "properties", None)
        message = mqtt_binding.MqttMessage(
            payload=msg.payload,
            content_type=getattr(props, "ContentType", None),
            user_properties=tuple(getattr(props, "UserProperty", []) or []),
        )
        self.put_threadsafe(Received(raw=msg, event=mqtt_binding.from_message(message)))

    async def ready(self) -> MqttConsumer:
        if not await asyncio.to_thread(self._subscribed.wait, 10):
            raise TimeoutError("MQTT test consumer did not subscribe")
        return self

    async def close(self) -> None:
        self._client.disconnect()
        await asyncio.to_thread(self._client.loop_stop)


class NatsConsumer(Consumer):
    async def start(self, url: str, subject: str) -> NatsConsumer:
        import nats

        self._client = await nats.connect(url)

        async def on_message(msg: Any) -> None:
            message = nats_binding.NatsMessage(payload=msg.data, headers=msg.headers)
            await self._queue.put(Received(raw=message, event=nats_binding.from_message(message)))

        await self._client.subscribe(subject, cb=on_message)
        await self._client.flush()
        return self

    async def close(self) -> None:
        await self._client.close()


class AmqpConsumer(Consumer):
    async def start(self, url: str, address: str) -> AmqpConsumer:
        await asyncio.to_thread(self._connect, url, address)
        return self

    def _connect(self, url: str, address: str) -> None:
        from proton.utils import BlockingConnection

        self._stop = threading.Event()
        self._connection = BlockingConnection(url, timeout=10)
        self._receiver = self._connection.create_receiver(address, credit=100)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from proton import ProtonException, Timeout

        while not self._stop.is_set():
            try:
                msg = self._receiver.receive(timeout=0.2)
            except Timeout:
                continue
            except ProtonException:  # the server went away: this consumer is done
                return
            message = from_proton(msg)
            self._receiver.accept()
            self.put_threadsafe(Received(raw=message, event=amqp_binding.from_message(message)))

    async def close(self) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 5)
        await asyncio.to_thread(self._connection.close)


class KafkaConsumer(Consumer):
    async def start(self, bootstrap: str, topic: str) -> KafkaConsumer:
        await asyncio.to_thread(self._connect, bootstrap, topic)
        return self

    def _connect(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer as RawConsumer
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
            future.result(10)
        self._consumer = RawConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"test-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 2000,
                "heartbeat.interval.ms": 500,
            }
        )
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            record = kafka_binding.KafkaRecord(
                headers=kafka_binding.headers_from_client(msg.headers()), key=msg.key(), value=msg.value()
            )
            self.put_threadsafe(Received(raw=record, event=kafka_binding.from_message(record)))

    async def close(self) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 5)
        await asyncio.to_thread(self._consumer.close)


class HttpConsumer(Consumer):
    """Reads the requests a recording HTTP sink got on one path."""

    def __init__(self, sink: Sink, path: str) -> None:
        super().__init__()
        self._sink = sink
        self._path = path
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> HttpConsumer:
        self._task = asyncio.create_task(self._poll())
        return self

    async def _poll(self) -> None:
        from ceprotocols.http.binding import from_binary, from_structured

        seen = 0
        while True:
            requests = self._sink.at(self._path)
            for request in requests[seen:]:
                content_type = request.headers.get("content-type", "")
                if content_type.startswith("application/cloudevents"):
                    event = from_structured(request.body)
                else:
                    event = from_binary(request.headers, request.body)
                await self._queue.put(Received(raw=request, event=event))
            seen = len(requests)
            await asyncio.sleep(0.02)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
