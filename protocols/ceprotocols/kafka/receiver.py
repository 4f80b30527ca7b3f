"""Kafka ingress: a consumer-group member that hands records over and commits after.

Source: ``kafka://host:port[,host:port...]/<topic>[?group=cebroker&offset=earliest]``.
Auto-commit is off: offsets are committed only after the callback stored the records of a
batch, so a crash re-delivers (at least once). Kafka has no rejection, so an invalid record is
counted, logged and committed past.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message

from ceprotocols.endpoint import Endpoint, redact
from ceprotocols.errors import SettingsError
from ceprotocols.kafka import binding
from ceprotocols.kafka.client import client_config
from ceprotocols.receiver import (
    RETRY_PAUSE,
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

log = logging.getLogger("ceprotocols.kafka")
BATCH = 200


def to_record(message: Message) -> binding.KafkaRecord:
    """The binding's view of a consumed record."""
    return binding.KafkaRecord(
        headers=binding.headers_from_client(message.headers()), key=message.key(), value=message.value()
    )


def decode_record(message: Message) -> dict[str, Any]:
    """A consumed record as a CloudEvent (raises for anything that is not one)."""
    return binding.from_message(to_record(message))


def record_trace(message: Message) -> TraceContext | None:
    """The record's ``traceparent``/``tracestate`` headers (not the event's ``ce_`` ones)."""
    return trace_of(binding.headers_from_client(message.headers()))


def raw_record(message: Message) -> RawMessage:
    """What is kept of a refused record: topic, partition, offset, key, headers and value."""
    where: list[tuple[str, Any]] = [
        ("topic", message.topic()),
        ("partition", message.partition()),
        ("offset", message.offset()),
    ]
    key = message.key()
    if key is not None:
        where.append(("key", key))
    return RawMessage.of(message.value(), [*where, *(message.headers() or ())])


class KafkaReceiver:
    """Consumes one Kafka topic as a member of a consumer group."""

    def __init__(self, source: str, endpoint: Endpoint, limits: Limits | None = None) -> None:
        self.source = redact(source)
        self.limits = limits or Limits()
        self.topic = endpoint.path.strip("/")
        if not self.topic:
            raise SettingsError("source", f"{self.source}: the path must name the topic")
        offset = endpoint.option("offset", "earliest")
        if offset not in ("earliest", "latest"):
            raise SettingsError("source", f"{self.source}: offset must be earliest or latest")
        self.config: dict[str, Any] = {
            **client_config(endpoint, None),
            "group.id": endpoint.option("group", "cebroker"),
            "enable.auto.commit": False,
            "auto.offset.reset": offset,
            "session.timeout.ms": int(endpoint.option("session_timeout_ms", "6000") or "6000"),
            # A topic that does not exist yet when the source starts is noticed within seconds.
            "topic.metadata.refresh.interval.ms": 5000,
        }
        self.stats = ReceiverStats()
        # librdkafka consumers are not thread-safe: every call runs on this one thread.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-consumer")
        self._consumer: Consumer | None = None
        self._closed = False

    async def _call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def run(self, on_events: OnEvents, on_reject: OnReject | None = None) -> None:
        """Consume until closed; librdkafka reconnects and rebalances by itself."""
        handover = Handover(self.source, self.stats, on_reject)
        consumer = Consumer(self.config)
        self._consumer = consumer
        await self._call(consumer.subscribe, [self.topic])
        self.stats.subscribed = True
        while not self._closed:
            self.stats.alive()
            try:
                messages: list[Message] = await self._call(consumer.consume, BATCH, 0.5)
            except KafkaException as exc:
                log.warning("source %s: %s", self.source, exc)
                await asyncio.sleep(RETRY_PAUSE)
                continue
            records = [m for m in messages if m.error() is None]
            for failed in (m for m in messages if m.error() is not None):
                log.debug("source %s: consumer event %s", self.source, failed.error())
            if not records:
                continue
            await handover(
                [decode(decode_record, m, raw_record, self.limits, record_trace) for m in records], on_events
            )
            try:
                await self._call(lambda: consumer.commit(asynchronous=False))
            except KafkaException as exc:  # e.g. a rebalance took the partition: it is re-read
                log.warning("source %s: commit failed: %s", self.source, exc)

    async def aclose(self) -> None:
        """Leave the group and close the consumer."""
        self._closed = True
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await self._call(consumer.close)
        self._executor.shutdown(wait=False)
