"""The wire shape each binding produces and accepts, checked against the binding specs and
against the official SDK's decoders where it has the binding (Kafka, AMQP)."""

from __future__ import annotations

import pytest
from ceprotocols.amqp import binding as amqp
from ceprotocols.errors import BindingError
from ceprotocols.eventform import EXTENSION_NAME
from ceprotocols.headers import percent_decode, percent_encode
from ceprotocols.kafka import binding as kafka
from ceprotocols.mqtt import binding as mqtt
from ceprotocols.nats import binding as nats
from ceprotocols.sdk import BYTES_FORMAT, to_sdk
from cloudevents.core.bindings import amqp as sdk_amqp
from cloudevents.core.bindings import kafka as sdk_kafka
from cloudevents.core.formats.json import JSONFormat

from protocols.ce_samples import PAYLOADS, make_event


def test_kafka_binary_headers_and_key() -> None:
    """Kafka 3.2.3: ``ce_`` headers, ``content-type`` for datacontenttype; 3.1 key mapping
    from ``partitionkey``, verbatim, the attribute kept in the headers."""
    record = kafka.to_binary(make_event(partitionkey="customer-7"))
    headers = dict(record.headers)
    assert headers["ce_id"]
    assert headers["ce_specversion"] == b"1.0"
    assert headers["content-type"] == b"application/json"
    assert headers["ce_boolext"] == b"true"
    assert headers["ce_intext"] == b"42"
    assert headers["ce_partitionkey"] == b"customer-7"
    assert "ce_datacontenttype" not in headers
    assert record.key == b"customer-7"


def test_kafka_key_attribute_and_tombstone() -> None:
    """A chosen key attribute feeds the key; an event without data is a null value (3.2.3)."""
    record = kafka.to_binary(make_event("no-data"), key_attribute="subject")
    assert record.key == b"resource/123"
    assert record.value is None
    assert kafka.to_binary(make_event()).key is None


def test_kafka_binary_decodes_with_the_official_sdk() -> None:
    """Our binary record is a valid CloudEvent for the SDK's own Kafka decoder."""
    event = make_event()
    record = kafka.to_binary(event)
    decoded = sdk_kafka.from_kafka(
        sdk_kafka.KafkaMessage(headers=dict(record.headers), key=record.key, value=record.value or b""),
        JSONFormat(),
    )
    assert decoded.get_id() == event["id"]
    assert decoded.get_extension("intext") == "42"
    assert decoded.get_data() == event["data"]


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_kafka_binary_is_the_sdk_encoding(payload: str) -> None:
    """The directly written record is the one the SDK's Kafka binding writes for the same event:
    the same headers in the same order and the same value (``time`` kept as the producer's text,
    as before)."""
    event = make_event(payload, partitionkey="k-1", time="2024-05-01T12:30:00.100+02:00")
    sdk = sdk_kafka.to_binary(to_sdk(event, native=False), BYTES_FORMAT, key_mapper=lambda _: None)
    expected = {**sdk.headers, "ce_time": b"2024-05-01T12:30:00.100+02:00"}
    record = kafka.to_binary(event)
    assert record.headers == tuple(expected.items())
    assert record.value == (sdk.value or None)


def test_kafka_binary_adds_no_time() -> None:
    """An event without ``time`` gets no ``ce_time`` header (the SDK's event would invent one)."""
    event = make_event()
    del event["time"]
    assert kafka.to_binary(event).header("ce_time") is None


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_amqp_binary_is_the_sdk_encoding(payload: str) -> None:
    """The directly written message is the one the SDK's AMQP binding writes for the same event:
    the same properties in the same order (``time`` as an AMQP timestamp, as before), the same
    content type and body."""
    event = make_event(payload)
    sdk = sdk_amqp.to_binary(to_sdk(event, native=True), BYTES_FORMAT)
    expected = {**sdk.application_properties, "cloudEvents_time": amqp.Timestamp(1714566600123)}
    message = amqp.to_binary(event)
    assert list(message.application_properties.items()) == list(expected.items())
    assert message.content_type == sdk.properties.get("content-type")
    assert message.body == (sdk.application_data or None)


def test_amqp_binary_adds_no_time() -> None:
    """An event without ``time`` gets no ``cloudEvents_time`` property."""
    event = make_event()
    del event["time"]
    assert "cloudEvents_time" not in amqp.to_binary(event).application_properties


REFUSED_BY_THE_SDK = [
    {"specversion": "0.3"},
    {"id": ""},
    {"subject": ""},
    {"datacontenttype": ""},
    {"dataschema": ""},
    {"time": "yesterday"},
    {"time": "2024-05-01T12:30:00"},
    {"Upper": "x"},
    {"floatext": 1.5},
]


@pytest.mark.parametrize("binding", ["kafka", "amqp"])
@pytest.mark.parametrize(
    "change", REFUSED_BY_THE_SDK, ids=lambda change: "=".join(map(repr, next(iter(change.items()))))
)
def test_binary_refuses_what_the_sdk_refuses(binding: str, change: dict[str, object]) -> None:
    """Every event the SDK's CloudEvent refuses is refused with BindingError."""
    event = {**make_event(), **change}
    with pytest.raises(BindingError):
        kafka.to_binary(event) if binding == "kafka" else amqp.to_binary(event)


def test_amqp_binary_refuses_a_subject_that_is_not_a_string() -> None:
    """AMQP keeps integers native, and the SDK refuses a subject that is not a string."""
    with pytest.raises(BindingError):
        amqp.to_binary({**make_event(), "subject": 7})


@pytest.mark.parametrize("subject", [True, 0, b""], ids=repr)
def test_amqp_binary_refuses_a_subject_that_is_not_a_non_empty_string(subject: object) -> None:
    """AMQP carries Booleans and Integers natively, so a ``subject`` of either stays one and is
    refused (the SDK wants a string there); an empty binary is refused as empty."""
    with pytest.raises(BindingError, match="subject must be a non-empty string"):
        amqp.to_binary({**make_event(), "subject": subject})


def test_kafka_binary_checks_the_canonical_text_of_not_empty_attributes() -> None:
    """Kafka headers carry canonical text: a ``subject`` of 7 is the non-empty text ``7`` and is
    sent, an empty binary is the empty text and is refused."""
    assert kafka.to_binary({**make_event(), "subject": 7}).header("ce_subject") == b"7"
    with pytest.raises(BindingError, match="subject must not be empty"):
        kafka.to_binary({**make_event(), "subject": b""})


@pytest.mark.parametrize("name", ["a", "7", "a1", "intext", "A", "aB", "a_b", "a-b", "é", "²", "ǅ", "a b"])
@pytest.mark.parametrize("binding", ["kafka", "amqp"])
def test_binary_extension_names_are_lower_case_letters_and_digits(binding: str, name: str) -> None:
    """An extension is sent exactly when its name is ``[a-z0-9]+`` (the SDK's test)."""
    event = {**make_event(), name: "x"}
    if EXTENSION_NAME.fullmatch(name):
        kafka.to_binary(event) if binding == "kafka" else amqp.to_binary(event)
    else:
        with pytest.raises(BindingError, match="extension name"):
            kafka.to_binary(event) if binding == "kafka" else amqp.to_binary(event)


def test_amqp_binary_properties() -> None:
    """AMQP 3.1.3.1: ``cloudEvents_`` prefix, native types, timestamp type for ``time``."""
    message = amqp.to_binary(make_event())
    props = message.application_properties
    assert props["cloudEvents_intext"] == 42
    assert props["cloudEvents_boolext"] is True
    assert props["cloudEvents_time"] == amqp.Timestamp(1714566600123)
    assert message.content_type == "application/json"
    assert "cloudEvents_datacontenttype" not in props


def test_amqp_keeps_sub_millisecond_time_as_string() -> None:
    """An AMQP timestamp holds milliseconds; a finer time is sent as its canonical string (3.1.4
    allows either form) so it survives exactly."""
    event = make_event(time="2024-05-01T12:30:00.123456789Z")
    message = amqp.to_binary(event)
    assert message.application_properties["cloudEvents_time"] == "2024-05-01T12:30:00.123456789Z"
    assert amqp.from_message(message)["time"] == event["time"]


def test_amqp_accepts_colon_prefix_and_string_forms() -> None:
    """Receivers accept ``cloudEvents:`` and canonical-string values (3.1.3.1, 3.1.4)."""
    message = amqp.AmqpMessage(
        content_type="text/plain",
        application_properties={
            "cloudEvents:specversion": "1.0",
            "cloudEvents:id": "1",
            "cloudEvents:source": "/s",
            "cloudEvents:type": "t",
            "cloudEvents:time": "2024-01-01T00:00:00Z",
            "other": "ignored",
        },
        body=b"hello",
    )
    assert amqp.from_message(message) == {
        "specversion": "1.0",
        "id": "1",
        "source": "/s",
        "type": "t",
        "time": "2024-01-01T00:00:00Z",
        "datacontenttype": "text/plain",
        "data": "hello",
    }


def test_amqp_binary_decodes_with_the_official_sdk() -> None:
    """Our AMQP binary message is a valid CloudEvent for the SDK's AMQP decoder."""
    event = make_event("text")
    message = amqp.to_binary(event)
    props = {
        k: v.millis if isinstance(v, amqp.Timestamp) else v for k, v in message.application_properties.items()
    }
    decoded = sdk_amqp.from_amqp(
        sdk_amqp.AMQPMessage(
            properties={"content-type": message.content_type},
            application_properties=props,
            application_data=message.body or b"",
        ),
        JSONFormat(),
    )
    assert decoded.get_type() == event["type"]
    assert decoded.get_extension("intext") == 42
    assert decoded.get_data() == event["data"]


def test_mqtt5_binary_user_properties_are_unprefixed() -> None:
    """MQTT 3.2: attribute names unchanged as user property names, Content Type property for
    datacontenttype; subscription user properties come after."""
    message = mqtt.to_binary(make_event(), extra=[("tenant", "a")])
    props = dict(message.user_properties)
    assert props["specversion"] == "1.0"
    assert props["intext"] == "42"
    assert props["boolext"] == "true"
    assert "datacontenttype" not in props
    assert message.content_type == "application/json"
    assert message.user_properties[-1] == ("tenant", "a")
    decoded = mqtt.from_message(message)
    assert "tenant" in decoded  # a valid attribute name is read back as an extension


def test_mqtt3_structured_has_no_metadata() -> None:
    """MQTT 3.1.1 is structured only, content type implied (3.1)."""
    message = mqtt.to_structured(make_event(), v5=False)
    assert message.content_type is None
    assert message.user_properties == ()


def test_nats_headers_are_percent_encoded() -> None:
    """NATS 3.1.3: ``ce-`` headers, datacontenttype included, HTTP percent-encoding."""
    message = nats.to_binary(make_event())
    assert message.headers is not None
    assert message.headers["ce-datacontenttype"] == "application/json"
    assert message.headers["ce-strext"] == "Euro%20%E2%82%AC%20%F0%9F%98%80%20%22quoted%22%20100%25"
    assert message.headers["ce-uriext"] == "https://example.com/a/b?c=d#e"


def test_nats_header_names_are_case_insensitive() -> None:
    """Header names are compared case-insensitively (NATS 3.1.3.1)."""
    headers = {"CE-SpecVersion": "1.0", "Ce-Id": "1", "ce-source": "/s", "CE-TYPE": "t"}
    assert nats.from_message(nats.NatsMessage(payload=b"", headers=headers))["specversion"] == "1.0"


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [("Euro%20%E2%82%AC", "Euro €"), ("%e2%82%ac", "€"), ('"a\\"b%41"', 'a"bA'), ("%41bc", "Abc")],
)
def test_percent_decoding_rules(raw: str, decoded: str) -> None:
    """HTTP 3.1.3.2: lower-case hex, needless escapes and quoted strings are accepted."""
    assert percent_decode(raw) == decoded


def test_percent_decoding_rejects_invalid_utf8() -> None:
    """HTTP 3.1.3.2: an overlong UTF-8 sequence must be rejected."""
    with pytest.raises(BindingError):
        percent_decode("%C0%A0")


def test_percent_encoding_example() -> None:
    """The spec's own example: ``Euro € 😀``."""
    assert percent_encode("Euro € 😀") == "Euro%20%E2%82%AC%20%F0%9F%98%80"


@pytest.mark.parametrize(
    "decode",
    [
        lambda: mqtt.from_message(mqtt.MqttMessage(payload=b"not json")),
        lambda: mqtt.from_message(mqtt.MqttMessage(payload=b'{"id": "1"}')),
        lambda: kafka.from_message(kafka.KafkaRecord(headers=(("ce_id", b"1"),), key=None, value=b"x")),
        lambda: kafka.from_message(
            kafka.KafkaRecord(
                headers=(("content-type", b"application/cloudevents+json"),), key=None, value=None
            )
        ),
        lambda: amqp.from_message(amqp.AmqpMessage(content_type="application/json", body=b"{}")),
        lambda: nats.from_message(nats.NatsMessage(payload=b"[1, 2]")),
        lambda: nats.from_message(
            nats.NatsMessage(
                payload=b"{",
                headers={
                    "ce-specversion": "1.0",
                    "ce-id": "1",
                    "ce-source": "/",
                    "ce-type": "t",
                    "ce-datacontenttype": "application/json",
                },
            )
        ),
    ],
    ids=[
        "mqtt-not-json",
        "mqtt-missing-attrs",
        "kafka-missing-attrs",
        "kafka-structured-null",
        "amqp-no-properties",
        "nats-array",
        "nats-bad-json-data",
    ],
)
def test_invalid_messages_raise_binding_error(decode: object) -> None:
    """A message that is not a CloudEvent raises BindingError (never another exception)."""
    assert callable(decode)
    with pytest.raises(BindingError):
        decode()
