"""Ingress receivers against real servers: events published by our senders (both content
modes) reach the callback decoded; invalid messages are counted and skipped without stopping
the consumer; a failing callback gets the same events again (nothing is acknowledged before the
callback returned)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import pytest
from ceprotocols.errors import BindingError
from ceprotocols.receiver import Receiver
from ceprotocols.registry import create_sender
from ceprotocols.sender import Sender
from ceprotocols.sources import create_receiver
from ceprotocols.tracecontext import TraceContext
from support.waiting import async_wait_until

from protocols.ce_samples import make_event
from protocols.harness import ProtocolCase, protocol_params, publish_raw, source_url, unique_name


class Collector:
    """An ``on_events`` callback that records events and can fail on purpose."""

    def __init__(self, *, transient_failures: int = 0, reject_type: str | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.calls = 0
        self.transient_failures = transient_failures
        self.reject_type = reject_type
        self.arrived = asyncio.Condition()

    async def __call__(self, events: list[dict[str, Any]], traces: Sequence[TraceContext | None], /) -> None:
        self.calls += 1
        if self.transient_failures:
            self.transient_failures -= 1
            raise RuntimeError("storage busy")
        if self.reject_type and any(e["type"] == self.reject_type for e in events):
            raise BindingError("rejected by the callback")
        async with self.arrived:
            self.events.extend(events)
            self.arrived.notify_all()

    async def wait_for(self, count: int, within: float = 30.0) -> list[dict[str, Any]]:
        async with asyncio.timeout(within), self.arrived:
            await self.arrived.wait_for(lambda: len(self.events) >= count)
        return self.events


class Live(NamedTuple):
    """A running receiver on a fresh topic/queue/subject ``name`` and a sender to publish there."""

    name: str
    receiver: Receiver
    sender: Sender


@asynccontextmanager
async def receiving(case: ProtocolCase, server: Any, collector: Collector) -> AsyncIterator[Live]:
    """Start a receiver feeding ``collector`` and wait until it is subscribed; on exit close the
    sender and stop the receiver."""
    name = unique_name()
    receiver = create_receiver(source_url(case, server, name))
    task = asyncio.create_task(receiver.run(collector))
    await async_wait_until(lambda: receiver.stats.subscribed, 20, f"the receiver of {name} to subscribe")
    sender = create_sender(case.protocol)
    try:
        yield Live(name, receiver, sender)
    finally:
        await sender.aclose()
        await receiver.aclose()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("case", protocol_params())
async def test_receives_events_in_every_mode(
    case: ProtocolCase, server_of: Callable[[ProtocolCase], Any]
) -> None:
    """Each content mode the binding defines decodes to the event that was sent."""
    server = server_of(case)
    collector = Collector()
    async with receiving(case, server, collector) as live:
        sent = []
        for mode in case.modes:
            event = make_event("json-object", modeext=mode)
            sent.append(event)
            await live.sender.deliver(event, case.destination(server, live.name, mode))
        got = await collector.wait_for(len(sent))
        assert [e["id"] for e in got] == [e["id"] for e in sent]
        assert [e["data"] for e in got] == [e["data"] for e in sent]
        assert live.receiver.stats.accepted == len(sent)


@pytest.mark.parametrize("case", protocol_params())
async def test_invalid_message_is_counted_and_skipped(
    case: ProtocolCase, server_of: Callable[[ProtocolCase], Any]
) -> None:
    """A message that is not a CloudEvent never stops the consumer: it is counted as invalid
    and the next valid event still arrives (issue: ingress)."""
    server = server_of(case)
    collector = Collector()
    async with receiving(case, server, collector) as live:
        await publish_raw(case, server, live.name, b"definitely not a cloudevent")
        event = make_event()
        await live.sender.deliver(event, case.destination(server, live.name))
        [got] = await collector.wait_for(1)
        assert got["id"] == event["id"]
        assert live.receiver.stats.invalid == 1


@pytest.mark.parametrize("case", protocol_params())
async def test_failing_callback_gets_the_events_again(
    case: ProtocolCase, server_of: Callable[[ProtocolCase], Any]
) -> None:
    """A transient callback failure acknowledges nothing: the same event is handed over again
    until the callback stores it, and it is stored once."""
    server = server_of(case)
    collector = Collector(transient_failures=2)
    async with receiving(case, server, collector) as live:
        event = make_event()
        await live.sender.deliver(event, case.destination(server, live.name))
        [got] = await collector.wait_for(1)
        assert got["id"] == event["id"]
        assert collector.calls == 3
        assert live.receiver.stats.retries == 2


@pytest.mark.parametrize("case", protocol_params())
async def test_event_refused_by_callback_is_isolated(
    case: ProtocolCase, server_of: Callable[[ProtocolCase], Any]
) -> None:
    """When the callback refuses an event as invalid, only that event is dropped; the others of
    the same batch are stored."""
    server = server_of(case)
    collector = Collector(reject_type="com.example.bad")
    async with receiving(case, server, collector) as live:
        destination = case.destination(server, live.name)
        good = [make_event() for _ in range(3)]
        await live.sender.deliver(good[0], destination)
        await live.sender.deliver(make_event(type="com.example.bad"), destination)
        await live.sender.deliver(good[1], destination)
        await live.sender.deliver(good[2], destination)
        got = await collector.wait_for(3)
        assert sorted(e["id"] for e in got) == sorted(e["id"] for e in good)
        assert live.receiver.stats.invalid == 1


def test_source_urls_are_checked() -> None:
    """A source without topic/queue/subject or with an unknown scheme is a clear error."""
    from ceprotocols.errors import SettingsError

    for bad in (
        "mqtt://127.0.0.1:1883",
        "kafka://127.0.0.1:9092",
        "ftp://x/y",
        "amqp://127.0.0.1",
        "mqtt://h/t?qos=7",
    ):
        with pytest.raises(SettingsError, match="source"):
            create_receiver(bad)
