"""The Kafka producer's backstop deadline: one timer for all its records.

librdkafka reports a record it could not deliver within ``message.timeout.ms``; the producer's
own deadline (the destination's timeout plus a second) is the backstop when no report comes. The
records of one producer share one timer, armed for the earliest deadline, and the records whose
reports came leave its list as they settle. These tests run a real librdkafka producer: against a
closed port (no report ever comes before ``message.timeout.ms``) and against a real tansu server.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from ceprotocols.errors import DeliveryError
from ceprotocols.kafka.binding import KafkaRecord
from ceprotocols.kafka.producer import KafkaProducer
from servers import CLOSED_PORT, TansuServer

RECORD = KafkaRecord(value=b"{}", key=None, headers=(("ce_id", b"1"),))


async def test_a_shorter_deadline_produced_later_still_expires_first() -> None:
    """A record with a shorter deadline than the one the timer waits for re-arms it: it fails
    at its own deadline, while the earlier, longer one keeps waiting."""
    config = {"bootstrap.servers": f"127.0.0.1:{CLOSED_PORT}", "message.timeout.ms": 30_000}
    producer = KafkaProducer(config, where="Kafka kafka://127.0.0.1:1")
    try:
        long = asyncio.create_task(producer.produce("events", RECORD, within=20.0))
        await asyncio.sleep(0)
        started = time.monotonic()
        with pytest.raises(DeliveryError) as caught:
            await producer.produce("events", RECORD, within=0.3)
        assert time.monotonic() - started < 5.0
        assert "no delivery report within 0.3s" in str(caught.value)
        assert not long.done()
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
    finally:
        await producer.close()


async def test_records_past_their_deadline_fail_each_with_its_own() -> None:
    """Several records waiting with different deadlines: each fails once its own has passed."""
    config = {"bootstrap.servers": f"127.0.0.1:{CLOSED_PORT}", "message.timeout.ms": 30_000}
    producer = KafkaProducer(config, where="Kafka kafka://127.0.0.1:1")
    try:
        started = time.monotonic()
        results = await asyncio.gather(
            *(producer.produce("events", RECORD, within=w) for w in (0.9, 0.3, 0.6)),
            return_exceptions=True,
        )
        assert all(isinstance(r, DeliveryError) for r in results)
        for within, result in zip((0.9, 0.3, 0.6), results, strict=True):
            assert f"no delivery report within {within}s" in str(result)
        assert time.monotonic() - started >= 0.9
        assert not producer._deadlines  # nothing left waiting
        assert producer._timer is None
    finally:
        await producer.close()


async def test_settled_records_leave_the_deadline_list(tansu: TansuServer) -> None:
    """Records confirmed by their delivery reports do not accumulate until the timer fires: the
    list holds at most the records still in flight (here 16 at a time, 320 in all)."""
    config = {"bootstrap.servers": tansu.bootstrap, "acks": "all", "linger.ms": 2}
    producer = KafkaProducer(config, where=f"Kafka {tansu.url}")
    try:
        for _ in range(20):
            await asyncio.gather(*(producer.produce("deadlines", RECORD, within=30.0) for _ in range(16)))
            assert len(producer._deadlines) <= 16
        assert not producer._deadlines
        assert producer._timer is not None  # armed for the first record's deadline, still ahead
    finally:
        await producer.close()
    assert producer._timer is None


async def test_a_record_left_waiting_by_close_still_fails_at_its_deadline() -> None:
    """Closing a producer (its flush gives up after 2 s) does not leave a record that got no
    report waiting for good: the timer still fails it at its own deadline."""
    config = {"bootstrap.servers": f"127.0.0.1:{CLOSED_PORT}", "message.timeout.ms": 30_000}
    producer = KafkaProducer(config, where="Kafka kafka://127.0.0.1:1")
    waiting = asyncio.create_task(producer.produce("events", RECORD, within=3.0))
    await asyncio.sleep(0)
    await producer.close()
    assert not waiting.done()
    with pytest.raises(DeliveryError) as caught:
        await asyncio.wait_for(waiting, 10.0)
    assert "no delivery report within 3.0s" in str(caught.value)
    assert producer._timer is None
