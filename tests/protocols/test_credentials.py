"""Sink credentials against real servers (Subscriptions API 3.2.6 ``sinkcredential``): PLAIN and
ACCESSTOKEN where the protocol has them; a refused credential is a final DeliveryRejected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ceprotocols.errors import DeliveryRejected
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination
from servers import MosquittoServer, NatsServer, RabbitMQServer

from protocols.ce_samples import make_event
from protocols.harness import unique_name


def plain(identifier: str, secret: str) -> dict[str, str]:
    return {"credentialtype": "PLAIN", "identifier": identifier, "secret": secret}


def token(value: str) -> dict[str, str]:
    return {"credentialtype": "ACCESSTOKEN", "accesstoken": value, "accesstokentype": "bearer"}


async def deliver(protocol: str, sink: str, settings: dict[str, Any], credential: dict[str, str]) -> None:
    sender = create_sender(protocol)
    try:
        await sender.deliver(
            make_event(),
            Destination(protocol=protocol, sink=sink, settings=settings, credential=credential, timeout=5),
        )
    finally:
        await sender.aclose()


@pytest.mark.mqtt
async def test_mqtt_plain_credential(server_factory: Callable[..., Any]) -> None:
    """PLAIN is the CONNECT user name and password; a wrong password is refused for good."""
    server: MosquittoServer = server_factory(MosquittoServer, users={"alice": "s3cret", "bearer": "tok-1"})
    settings = {"topicname": unique_name()}
    await deliver("MQTT5", server.url, settings, plain("alice", "s3cret"))
    await deliver("MQTT3", server.url, {**settings, "contentmode": "structured"}, plain("alice", "s3cret"))
    await deliver("MQTT5", server.url, settings, token("tok-1"))  # token as password, type as user
    with pytest.raises(DeliveryRejected) as caught:
        await deliver("MQTT5", server.url, settings, plain("alice", "wrong"))
    assert not caught.value.retryable


@pytest.mark.nats
@pytest.mark.parametrize(
    ("options", "good", "bad"),
    [
        ({"user": "bob", "password": "pw"}, plain("bob", "pw"), plain("bob", "nope")),
        ({"token": "t0k"}, token("t0k"), token("other")),
    ],
    ids=["plain", "token"],
)
async def test_nats_credentials(
    options: dict[str, str], good: dict[str, str], bad: dict[str, str], server_factory: Callable[..., Any]
) -> None:
    """PLAIN is user/password, ACCESSTOKEN the NATS token; a refused one is final."""
    server: NatsServer = server_factory(NatsServer, **options)
    settings = {"subject": unique_name()}
    await deliver("NATS", server.url, settings, good)
    with pytest.raises(DeliveryRejected) as caught:
        await deliver("NATS", server.url, settings, bad)
    assert not caught.value.retryable


@pytest.mark.amqp
async def test_amqp_sasl_plain(rabbitmq: RabbitMQServer) -> None:
    """PLAIN is SASL PLAIN (a wrong password is final); ACCESSTOKEN has no AMQP form here and is
    refused before connecting."""
    settings = {"address": f"/queue/{unique_name()}"}
    await deliver("AMQP", rabbitmq.url, settings, plain("guest", "guest"))
    with pytest.raises(DeliveryRejected, match="refused the credentials") as caught:
        await deliver("AMQP", rabbitmq.url, settings, plain("guest", "wrong"))
    assert not caught.value.retryable
    with pytest.raises(DeliveryRejected, match="no access-token"):
        await deliver("AMQP", rabbitmq.url, settings, token("x"))


async def test_expired_token_is_refused_before_connecting() -> None:
    """An ACCESSTOKEN past ``accesstokenexpiresutc`` cannot work: final, no connection."""
    credential = {**token("t"), "accesstokenexpiresutc": "2001-01-01T00:00:00Z"}
    with pytest.raises(DeliveryRejected, match="expired"):
        await deliver("NATS", "nats://127.0.0.1:1", {"subject": "s"}, credential)
