"""The in-memory sender of the tests (support.memory) takes the HTTP sender's place only in a
broker built with it: the sender pool gives the registry's senders unless its builder passes a
replacement, and a broker given the in-memory sender retries, dead-letters and delivers with it
as with the real one."""

from __future__ import annotations

from ceprotocols.egress import NetworkPolicy
from ceprotocols.errors import DeliveryRejected, TargetUnreachable
from ceprotocols.http import HttpSender
from support.broker import Broker
from support.events import event
from support.memory import MemorySender
from support.waiting import wait_until

from cebroker.pipeline.senders import SenderPool


async def test_the_pool_uses_a_replacement_only_when_its_builder_passes_one() -> None:
    memory = MemorySender()
    policy = NetworkPolicy.from_cidrs([], allow_loopback=True)
    real = SenderPool(webhook_origin="localhost", validate_webhooks=False, policy=policy)
    replaced = SenderPool(
        webhook_origin="localhost", validate_webhooks=False, policy=policy, factories=memory.senders
    )
    try:
        assert isinstance(real.get("HTTP"), HttpSender)
        assert replaced.get("HTTP") is memory
        assert type(replaced.get("NATS")) is type(real.get("NATS"))  # the others stay the registry's
    finally:
        await real.aclose()
        await replaced.aclose()


def test_a_broker_delivers_into_it_after_a_retry_and_dead_letters_a_refusal(
    memory_broker: Broker, memory: MemorySender
) -> None:
    memory.scripts["/retried"] = [TargetUnreachable("connection refused")]
    memory.default["/refused"] = DeliveryRejected("400 Bad Request", status=400)
    fast = {"initialdelay": "0.05", "maxattempts": "3"}
    retried = memory_broker.subscribe(f"{memory.url}/retried", config=fast)
    refused = memory_broker.subscribe(f"{memory.url}/refused", config=fast)
    assert memory_broker.send(event(1)).status_code == 202
    (got,) = memory.wait("/retried", 1)
    assert got["id"] == "e-1"
    assert got["data"] == {"n": 1}
    assert memory.scripts["/retried"] == []  # the first attempt failed
    wait_until(lambda: memory_broker.status(refused)["deadlettered"] == 1)
    memory_broker.settled()
    assert memory_broker.status(retried)["deadlettered"] == 0
    assert memory.events("/refused") == []
