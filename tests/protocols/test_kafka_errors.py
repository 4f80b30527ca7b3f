"""How the Kafka sender reports librdkafka's errors, above all a refused credential.

librdkafka reports a refused SASL login (or a denied cluster/topic) only through the producer's
error callback; the queued records then fail with ``_MSG_TIMED_OUT``. docs/protocols.md
("Credentials") promises that a credential the server refuses is a final ``DeliveryRejected``, so
these records must not come out as a retryable timeout or unreachable target. No server here can
do SASL, so the tests feed real ``confluent_kafka.KafkaError`` objects into ``translate`` and into
the producer's callbacks; the producer tests run a real librdkafka producer against a closed port.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from ceprotocols.errors import DeliveryRejected, DeliveryTimeout, TargetUnreachable
from ceprotocols.kafka.binding import KafkaRecord
from ceprotocols.kafka.producer import KafkaProducer, translate
from confluent_kafka import KafkaError
from servers import CLOSED_PORT

WHERE = "Kafka kafka://127.0.0.1:1"
REFUSALS = [
    pytest.param(KafkaError._AUTHENTICATION, id="_AUTHENTICATION"),
    pytest.param(KafkaError.SASL_AUTHENTICATION_FAILED, id="SASL_AUTHENTICATION_FAILED"),
    pytest.param(KafkaError.TOPIC_AUTHORIZATION_FAILED, id="TOPIC_AUTHORIZATION_FAILED"),
    pytest.param(KafkaError.CLUSTER_AUTHORIZATION_FAILED, id="CLUSTER_AUTHORIZATION_FAILED"),
]
RECORD = KafkaRecord(value=b"{}", key=None, headers=(("ce_id", b"1"),))


def refusal(code: int = KafkaError._AUTHENTICATION) -> KafkaError:
    return KafkaError(code, "SASL authentication error: Authentication failed during authentication")


def test_a_timeout_without_a_refusal_stays_retryable() -> None:
    """A record that times out for no known reason may succeed later (errors.py hierarchy)."""
    error = translate(KafkaError(KafkaError._MSG_TIMED_OUT), WHERE)
    assert type(error) is DeliveryTimeout
    assert error.retryable


def test_a_transport_failure_without_a_refusal_is_unreachable() -> None:
    """Brokers that cannot be reached are TargetUnreachable, retryable (docs/protocols.md)."""
    error = translate(KafkaError(KafkaError._TRANSPORT, "Connection refused"), WHERE)
    assert type(error) is TargetUnreachable
    assert error.retryable


@pytest.mark.parametrize("code", REFUSALS)
@pytest.mark.parametrize("failure", [KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT])
def test_a_record_failing_after_a_refusal_is_a_final_rejection(code: int, failure: int) -> None:
    """docs/protocols.md, Credentials: a refused credential is a final DeliveryRejected, and it
    names the refusal (not the timeout) as its cause."""
    cause = refusal(code)
    error = translate(KafkaError(failure), WHERE, cause)
    assert type(error) is DeliveryRejected
    assert not error.retryable
    assert error.status == cause.name()
    assert cause.name() in str(error)
    assert "Authentication failed" in str(error)


@pytest.mark.parametrize("code", REFUSALS)
def test_a_refusal_in_a_delivery_report_is_final(code: int) -> None:
    """An authorization error reported for the record itself is final too."""
    error = translate(KafkaError(code, "denied", retriable=True), WHERE)
    assert type(error) is DeliveryRejected
    assert not error.retryable


def test_an_unrelated_rejection_ignores_a_past_refusal() -> None:
    """Only failures the refusal explains turn into it; a too-large record stays itself."""
    error = translate(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), WHERE, refusal())
    assert type(error) is DeliveryRejected
    assert error.status == "MSG_SIZE_TOO_LARGE"


@pytest.fixture
async def producer() -> AsyncIterator[KafkaProducer]:
    """A real librdkafka producer whose bootstrap port has nothing listening."""
    config = {"bootstrap.servers": f"127.0.0.1:{CLOSED_PORT}", "message.timeout.ms": 1000}
    made = KafkaProducer(config, where=WHERE)
    yield made
    await made.close()


async def test_timed_out_records_after_a_refused_login_are_rejected(producer: KafkaProducer) -> None:
    """The reported path: ``_AUTHENTICATION`` through error_cb, then ``_MSG_TIMED_OUT`` from
    librdkafka's own delivery report -> final DeliveryRejected (docs/protocols.md, Credentials)."""
    producer._on_error(refusal())
    with pytest.raises(DeliveryRejected) as caught:
        await producer.produce("events", RECORD, within=10.0)
    assert not caught.value.retryable
    assert caught.value.status == "_AUTHENTICATION"
    assert "_MSG_TIMED_OUT" in str(caught.value)


async def test_timed_out_records_without_a_refusal_are_unreachable(producer: KafkaProducer) -> None:
    """The control: the same closed port without a refusal is retryable TargetUnreachable."""
    with pytest.raises(TargetUnreachable) as caught:
        await producer.produce("events", RECORD, within=10.0)
    assert caught.value.retryable


async def test_no_delivery_report_in_time_after_a_refusal_is_rejected() -> None:
    """The sender's own deadline passing first is the same refusal, not a timeout."""
    config = {"bootstrap.servers": f"127.0.0.1:{CLOSED_PORT}", "message.timeout.ms": 1500}
    producer = KafkaProducer(config, where=WHERE)
    try:
        producer._on_error(refusal(KafkaError.SASL_AUTHENTICATION_FAILED))
        with pytest.raises(DeliveryRejected) as caught:
            await producer.produce("events", RECORD, within=0.2)
        assert caught.value.status == "SASL_AUTHENTICATION_FAILED"
        assert "no delivery report within" in str(caught.value)
    finally:
        await producer.close()


async def test_a_successful_delivery_forgets_the_refusal(producer: KafkaProducer) -> None:
    """Once a record is delivered the credential works again: later timeouts are retryable."""
    loop = producer._loop
    producer._on_error(refusal())
    delivered, later = loop.create_future(), loop.create_future()
    producer._settle(delivered, None)
    producer._settle(later, KafkaError(KafkaError._MSG_TIMED_OUT))
    assert delivered.result() is None
    error = later.exception()
    assert type(error) is DeliveryTimeout
    assert error.retryable


async def test_a_connectivity_error_does_not_forget_the_refusal(producer: KafkaProducer) -> None:
    """librdkafka follows a refused login with broker-down errors; the refusal still explains
    the records that fail afterwards."""
    producer._on_error(refusal())
    producer._on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    failed = producer._loop.create_future()
    producer._settle(failed, KafkaError(KafkaError._MSG_TIMED_OUT))
    assert type(failed.exception()) is DeliveryRejected
