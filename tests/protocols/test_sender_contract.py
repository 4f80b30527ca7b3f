"""The sender contract, run against every protocol's real server.

What every sender promises (``ceprotocols.sender``): it delivers the event intact (all
attributes and data, in each content mode the binding defines), returns only once the protocol
confirmed the delivery, shares one connection per endpoint across deliveries, translates
failures into the DeliveryError tree (an unreachable target is TargetUnreachable and
retryable; a bad setting is DeliveryRejected and final), and reconnects after the server
comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from ceprotocols.errors import DeliveryRejected, TargetUnreachable
from ceprotocols.registry import SENDERS, create_sender
from ceprotocols.sender import Destination, Sender

from protocols.ce_samples import as_strings, make_event
from protocols.harness import ProtocolCase, connections, protocol_params, unique_name


def expected(case: ProtocolCase, mode: str, event: dict[str, Any]) -> dict[str, Any]:
    """What the consumer should decode: the event itself, except that binary mode over text
    metadata turns attribute values into canonical strings."""
    return event if mode == "structured" or case.native_types else as_strings(event)


@pytest.mark.parametrize("protocol", sorted(SENDERS))
def test_every_registered_sender_satisfies_the_protocol(protocol: str) -> None:
    """Each registry entry builds a runtime-checkable :class:`Sender`."""
    assert isinstance(create_sender(protocol), Sender)


def test_unknown_protocol_is_a_clear_error() -> None:
    """An unknown protocol name fails with the list of known ones."""
    with pytest.raises(KeyError, match="MQTT5"):
        create_sender("CARRIER-PIGEON")


@pytest.mark.parametrize("payload", ["json-object", "binary", "text", "no-data"])
@pytest.mark.parametrize(("case", "mode"), protocol_params(modes=True, http=True))
async def test_delivers_event_intact(
    case: ProtocolCase, mode: str, payload: str, server_of: Callable[[ProtocolCase], Any]
) -> None:
    """Every attribute (extensions of every type) and the data arrive as sent (binding specs,
    structured and binary content modes)."""
    server = server_of(case)
    name = unique_name()
    consumer = await case.consumer(server, name)
    sender = create_sender(case.protocol)
    try:
        event = make_event(payload)
        await sender.deliver(
            event,
            case.destination(server, name, mode),
        )
        [received] = await consumer.receive(1)
        assert received.event == expected(case, mode, event)
    finally:
        await sender.aclose()
        await consumer.close()


@pytest.mark.parametrize("case", protocol_params())
async def test_many_deliveries_share_one_connection(
    case: ProtocolCase, server_of: Callable[[ProtocolCase], Any]
) -> None:
    """Concurrent deliveries to one endpoint reuse one connection (never one per event), and
    each of them is received."""
    server = server_of(case)
    name = unique_name()
    consumer = await case.consumer(server, name)
    sender = create_sender(case.protocol)
    destination = case.destination(server, name)
    try:
        events = [make_event() for _ in range(40)]
        await asyncio.gather(*(sender.deliver(event, destination) for event in events))
        assert connections(sender) == 1
        received = await consumer.receive(len(events))
        assert sorted(r.event["id"] for r in received) == sorted(e["id"] for e in events)
    finally:
        await sender.aclose()
        await consumer.close()


@pytest.mark.parametrize("case", protocol_params(http=True))
async def test_unreachable_target_is_retryable_target_unreachable(case: ProtocolCase) -> None:
    """Nothing listens at the sink: TargetUnreachable, retryable, no client exception leaks."""
    sender = create_sender(case.protocol)
    destination = Destination(
        protocol=case.protocol,
        sink=case.unreachable_sink(),
        settings=case.settings("nowhere", case.modes[0]),
        timeout=3,
    )
    try:
        with pytest.raises(TargetUnreachable) as caught:
            await sender.deliver(make_event(), destination)
        assert caught.value.retryable
    finally:
        await sender.aclose()


@pytest.mark.parametrize("case", protocol_params())
async def test_missing_required_setting_is_a_final_rejection(case: ProtocolCase) -> None:
    """A destination without its topic/address/subject cannot ever work: DeliveryRejected,
    not retryable, raised before any connection is made."""
    sender = create_sender(case.protocol)
    try:
        with pytest.raises(DeliveryRejected) as caught:
            await sender.deliver(
                make_event(), Destination(protocol=case.protocol, sink=case.unreachable_sink(), settings={})
            )
        assert not caught.value.retryable
        assert connections(sender) == 0
    finally:
        await sender.aclose()


@pytest.mark.parametrize("case", protocol_params())
async def test_unsupported_credential_type_is_a_final_rejection(case: ProtocolCase) -> None:
    """Subscriptions API 3.2.6: a credential type the protocol cannot use is refused clearly."""
    sender = create_sender(case.protocol)
    destination = Destination(
        protocol=case.protocol,
        sink=case.unreachable_sink(),
        settings=case.settings("x", case.modes[0]),
        credential={"credentialtype": "REFRESHTOKEN", "refreshtoken": "r"},
    )
    try:
        with pytest.raises(DeliveryRejected, match="REFRESHTOKEN") as caught:
            await sender.deliver(make_event(), destination)
        assert not caught.value.retryable
    finally:
        await sender.aclose()
