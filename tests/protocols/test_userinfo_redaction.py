"""The senders' error messages never quote a URL's user information (a token given as the user
name, or a password): they are stored with the delivery (its last error, the dead letter's
reason) and logged. Each translation of a foreign error is checked with a URL that carries
one, through the real client where no server is needed (a port that refuses connections)."""

from __future__ import annotations

import pytest
from ceprotocols.endpoint import EndpointError, checked_sink, parse_endpoint, redact_text, sink_endpoint
from ceprotocols.errors import DeliveryError, DeliveryRejected, SettingsError, TargetUnreachable
from ceprotocols.http.transport import HttpTransport, HttpTransportError, delivery_error
from ceprotocols.kafka.producer import translate as kafka_translate
from ceprotocols.nats.sender import NatsSender
from ceprotocols.nats.sender import translate as nats_translate
from ceprotocols.sender import Destination
from confluent_kafka import KafkaError
from nats.errors import ConnectionClosedError, MaxPayloadError
from servers import CLOSED_PORT, NatsServer

SECRET = "s3cr3t-Tok3n"
USERINFOS = [pytest.param(SECRET, id="token-as-user"), pytest.param(f"user:{SECRET}", id="password")]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"cannot reach http://user:{SECRET}@h:1/x: refused", "cannot reach http://***@h:1/x: refused"),
        (f"NATS nats://{SECRET}@h:4222 subject", "NATS nats://***@h:4222 subject"),
        (f"'mqtt://u:p@{SECRET}@h'", "'mqtt://***@h'"),  # an "@" in the password
        (f"a kafka://u:{SECRET}@h:1,h:2 and amqp://{SECRET}@h", "a kafka://***@h:1,h:2 and amqp://***@h"),
        ("http://h:1/a@b, mqtt://h m@example.com", "http://h:1/a@b, mqtt://h m@example.com"),
    ],
)
def test_redact_text_hides_user_names_and_passwords(text: str, shown: str) -> None:
    assert redact_text(text) == shown


@pytest.mark.parametrize("userinfo", USERINFOS)
def test_a_sink_that_does_not_parse_is_named_without_its_userinfo(userinfo: str) -> None:
    url = f"mqtt://{userinfo}@broker.example:port/t"
    with pytest.raises(EndpointError) as parsed:
        parse_endpoint(url, schemes={"mqtt": 1883})
    with pytest.raises(DeliveryRejected) as delivered:
        sink_endpoint(url, schemes={"mqtt": 1883})
    with pytest.raises(SettingsError) as checked:
        checked_sink(url, schemes={"mqtt": 1883})
    for error in (parsed.value, delivered.value, checked.value):
        assert "mqtt://***@broker.example:port/t" in str(error)
        assert SECRET not in str(error)


@pytest.mark.parametrize("userinfo", USERINFOS)
async def test_http_transport_errors_leave_the_userinfo_out(userinfo: str) -> None:
    """A refused connection, and a URL the transport cannot use, through the real transport."""
    transport = HttpTransport()
    try:
        for url, kind in (
            (f"http://{userinfo}@127.0.0.1:{CLOSED_PORT}/x", TargetUnreachable),
            (f"http://{userinfo}@127.0.0.1:99999/x", DeliveryRejected),
        ):
            with pytest.raises(HttpTransportError) as caught:
                await transport.request("POST", url, {}, b"{}", deadline=5.0)
            assert SECRET not in str(caught.value)
            assert "http://***@127.0.0.1:" in str(caught.value)
            error = delivery_error(caught.value, "webhook validation")
            assert isinstance(error, kind)
            assert SECRET not in str(error)
    finally:
        await transport.aclose()


@pytest.mark.parametrize("userinfo", USERINFOS)
@pytest.mark.parametrize(
    "exc",
    [ConnectionClosedError(), MaxPayloadError(), OSError(f"cannot connect to nats://{SECRET}@h:4222")],
    ids=["closed", "max-payload", "os-error"],
)
def test_nats_translate_leaves_the_userinfo_out(userinfo: str, exc: Exception) -> None:
    error = nats_translate(exc, f"NATS nats://{userinfo}@127.0.0.1:4222 events")
    assert isinstance(error, DeliveryError)
    assert SECRET not in str(error)
    assert "nats://***@127.0.0.1:4222" in str(error)


@pytest.mark.nats
async def test_nats_sender_names_the_sink_without_its_userinfo(nats_server: NatsServer) -> None:
    """A real delivery failing once connected (a payload above the server's limit) names the
    sink, not its token."""
    host_port = nats_server.url.removeprefix("nats://")
    sender = NatsSender()
    event = {"specversion": "1.0", "id": "1", "source": "/t", "type": "t", "data": "x" * (2 << 20)}
    destination = Destination(protocol="NATS", sink=f"nats://{SECRET}@{host_port}", settings={"subject": "s"})
    try:
        with pytest.raises(DeliveryRejected) as caught:
            await sender.deliver(event, destination)
    finally:
        await sender.aclose()
    assert "MaxPayloadError" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("userinfo", USERINFOS)
@pytest.mark.parametrize(
    ("error", "refusal"),
    [
        (KafkaError(KafkaError._TRANSPORT, "Connection refused"), None),
        (KafkaError(KafkaError._MSG_TIMED_OUT), KafkaError(KafkaError._AUTHENTICATION, "failed")),
        (KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"), None),
    ],
    ids=["unreachable", "refused-login", "denied"],
)
def test_kafka_translate_leaves_the_userinfo_out(
    userinfo: str, error: KafkaError, refusal: KafkaError | None
) -> None:
    translated = kafka_translate(error, f"Kafka kafka://{userinfo}@127.0.0.1:9092", refusal)
    assert SECRET not in str(translated)
    assert "kafka://***@127.0.0.1:9092" in str(translated)
