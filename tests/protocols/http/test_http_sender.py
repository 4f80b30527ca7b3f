"""HttpSender outcomes and errors, against a real local HTTP server.

Issue "HTTP delivery": 2xx confirms; 5xx/408/429 are retryable with Retry-After; other 4xx are
final; redirects are not followed (HTTP Webhook spec 2.2); connection errors are retryable.
"""

from __future__ import annotations

import json

import pytest
from ceprotocols.errors import DeliveryRejected, DeliveryTimeout, TargetUnreachable
from ceprotocols.http import HttpSender, parse_retry_after
from ceprotocols.sender import BatchSender, Destination, Sender
from support.sinks import Reply, Sink

EVENT = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data": {"x": 1}}


def test_http_sender_satisfies_the_sender_contract() -> None:
    """Checked once against the runtime-checkable Protocols."""
    assert isinstance(HttpSender(validate_webhooks=False), Sender)
    assert isinstance(HttpSender(validate_webhooks=False), BatchSender)


async def test_a_batch_is_one_request_and_one_outcome(sink: Sink) -> None:
    """``deliver_batch``: one ``application/cloudevents-batch+json`` array with the settings'
    headers; a refusal is one error for the whole batch."""
    events = [EVENT, {**EVENT, "id": "2", "data": {"x": 2}}]
    destination = Destination(
        protocol="HTTP",
        sink=f"{sink.url}/batch",
        settings={"contentmode": "batch", "headers": {"x-team": "a"}},
    )
    sender = HttpSender(validate_webhooks=False)
    try:
        await sender.deliver_batch(events, destination)
        sink.default["/batch"] = Reply(422, body=b"no")
        with pytest.raises(DeliveryRejected) as info:
            await sender.deliver_batch(events, destination)
        del sink.default["/batch"]
        await sender.deliver(EVENT, destination)  # one event of a batch subscription: structured
    finally:
        await sender.aclose()
    first, refused, single = sink.at("/batch")
    assert first.headers["content-type"].startswith("application/cloudevents-batch+json")
    assert first.headers["x-team"] == "a"
    assert json.loads(first.body) == events
    assert (info.value.status, info.value.retryable, info.value.body) == (422, False, "no")
    assert refused.body == first.body
    assert single.headers["content-type"].startswith("application/cloudevents+json")


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(500, True), (503, True), (408, True), (429, True), (400, False), (410, False), (302, False)],
)
async def test_status_classification(sink: Sink, status: int, retryable: bool) -> None:
    recorder, url = sink, sink.url
    recorder.default["/x"] = Reply(
        status, headers={"Retry-After": "7", "Location": "/elsewhere"}, body=b"why"
    )
    sender = HttpSender(validate_webhooks=False)
    try:
        with pytest.raises(DeliveryRejected) as info:
            await sender.deliver(EVENT, Destination(protocol="HTTP", sink=f"{url}/x"))
    finally:
        await sender.aclose()
    assert info.value.retryable is retryable
    assert info.value.status == status
    assert info.value.retry_after == 7.0
    assert info.value.body == "why"
    assert len(recorder.at("/elsewhere")) == 0


async def test_connection_refused_is_retryable() -> None:
    sender = HttpSender(validate_webhooks=False)
    try:
        with pytest.raises(TargetUnreachable) as info:
            await sender.deliver(EVENT, Destination(protocol="HTTP", sink="http://127.0.0.1:9/"))
    finally:
        await sender.aclose()
    assert info.value.retryable


async def test_connections_are_reused(sink: Sink) -> None:
    """Keep-alive: many deliveries to one sink share a connection."""
    recorder, url = sink, sink.url
    sender = HttpSender(validate_webhooks=False)
    try:
        for _ in range(5):
            await sender.deliver(EVENT, Destination(protocol="HTTP", sink=f"{url}/ka"))
    finally:
        await sender.aclose()
    assert len(recorder.at("/ka")) == 5
    assert len({r.peer for r in recorder.at("/ka")}) == 1


def test_retry_after_forms() -> None:
    """Retry-After is delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


async def test_handshake_to_an_unreachable_origin_is_retryable() -> None:
    """The validation request failing at the transport is a transient failure, not a refusal."""
    sender = HttpSender(validate_webhooks=True, webhook_origin="broker.example")
    try:
        with pytest.raises(TargetUnreachable) as info:
            await sender.deliver(EVENT, Destination(protocol="HTTP", sink="http://127.0.0.1:9/hook"))
    finally:
        await sender.aclose()
    assert info.value.retryable


async def test_header_with_a_line_break_is_a_final_rejection(sink: Sink) -> None:
    """A ``protocolsettings.headers`` value that would inject a header (RFC 9110 5.5) is refused
    before anything is sent, as a final (not retryable) rejection naming the reason."""
    recorder, url = sink, sink.url
    destination = Destination(
        protocol="HTTP", sink=f"{url}/inj", settings={"headers": {"x-a": "v\r\nx-b: injected"}}
    )
    sender = HttpSender(validate_webhooks=False)
    try:
        with pytest.raises(DeliveryRejected, match="control character") as info:
            await sender.deliver(EVENT, destination)
    finally:
        await sender.aclose()
    assert not info.value.retryable
    assert info.value.status == "invalid"
    assert len(recorder.at("/inj")) == 0


async def test_slow_sink_is_a_retryable_timeout(sink: Sink) -> None:
    """No answer within the destination's timeout: DeliveryTimeout, retryable."""
    recorder, url = sink, sink.url
    recorder.default["/slow"] = Reply(200, delay=2.0)
    sender = HttpSender(validate_webhooks=False)
    try:
        with pytest.raises(DeliveryTimeout) as info:
            await sender.deliver(EVENT, Destination(protocol="HTTP", sink=f"{url}/slow", timeout=0.3))
    finally:
        await sender.aclose()
    assert info.value.retryable


async def test_event_without_content_type_is_sent_without_one(sink: Sink) -> None:
    """Binary mode, no data: no Content-Type, so the receiver sees no ``datacontenttype``
    (HTTP Protocol Binding 3.1.1)."""
    recorder, url = sink, sink.url
    event = {k: v for k, v in EVENT.items() if k != "data"}
    sender = HttpSender(validate_webhooks=False)
    try:
        await sender.deliver(event, Destination(protocol="HTTP", sink=f"{url}/bare"))
    finally:
        await sender.aclose()
    (received,) = recorder.at("/bare")
    assert received.headers["ce-id"] == "1"
    assert "content-type" not in {name.lower() for name in received.headers}


async def test_a_plain_delivery_sends_what_a_configured_one_does(sink: Sink) -> None:
    """A delivery without configured headers, credential, signature or trace context takes a
    shorter path to the transport: the same method, ``ce-`` headers, body and outcomes as one
    with configured headers, and the handshake's origin header when validation is on."""
    sink.default["/gone"] = Reply(410, body=b"no")
    sender = HttpSender(validate_webhooks=True, webhook_origin="broker.example")
    try:
        for path, settings in (
            ("/plain", {"method": "put"}),
            ("/configured", {"method": "put", "headers": {"x-a": "1"}}),
        ):
            await sender.deliver(
                EVENT, Destination(protocol="HTTP", sink=f"{sink.url}{path}", settings=settings)
            )
        with pytest.raises(DeliveryRejected) as info:
            await sender.deliver(EVENT, Destination(protocol="HTTP", sink=f"{sink.url}/gone"))
    finally:
        await sender.aclose()
    (plain,), (configured,) = sink.at("/plain"), sink.at("/configured")
    assert (plain.method, configured.method) == ("PUT", "PUT")
    assert plain.body == configured.body == b'{"x":1}'
    assert configured.headers["x-a"] == "1"
    for name in ("ce-id", "ce-source", "ce-type", "ce-specversion", "content-type", "webhook-request-origin"):
        assert plain.headers[name] == configured.headers[name], name
    assert plain.headers["webhook-request-origin"] == "broker.example"
    assert (info.value.status, info.value.retryable, info.value.body) == (410, False, "no")
