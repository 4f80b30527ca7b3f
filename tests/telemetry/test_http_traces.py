"""One trace from the producer through the broker to an HTTP sink, exported to a real OTLP/HTTP
receiver (tests/support/otlp.py): the publish span, the match span and the delivery attempt
span, the ``traceparent`` the sink gets, the management API's server spans, the attributes
(never a secret), and the JSON log lines of a traced request."""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Callable, Iterator

import pytest
from support.broker import Broker
from support.otlp import Receiver, served_receiver
from support.sinks import Sink
from support.waiting import wait_for

from cebroker.logs import TraceFields, logging_config

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PRODUCER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PRODUCER_SPAN}-01"
TOKEN = "tok-" + secrets.token_hex(12)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """An OTLP/HTTP receiver; spans are exported every 50 ms."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
    with served_receiver() as found:
        yield found


@pytest.fixture
def traced(receiver: Receiver, make_broker: Callable[..., Broker]) -> Broker:
    """A broker exporting to ``receiver`` (stopped before the receiver is)."""
    return make_broker(otel_exporter_otlp_endpoint=receiver.url, otel_service_name="broker-under-test")


def event(number: int, **extra: object) -> dict[str, object]:
    return {"specversion": "1.0", "id": f"e{number}", "source": "/tests", "type": "t.traced", **extra}


def test_publish_and_delivery_spans_join_the_producers_trace(
    traced: Broker, receiver: Receiver, sink: Sink
) -> None:
    created = traced.http.post(
        "/subscriptions",
        json={
            "protocol": "HTTP",
            "sink": f"{sink.url}/hook",
            "sinkcredential": {
                "credentialtype": "ACCESSTOKEN",
                "accesstoken": TOKEN,
                "accesstokentype": "Bearer",
                "accesstokenexpiresutc": "2099-01-01T00:00:00Z",
            },
            "protocolsettings": {"webhooksecret": "generate", "headers": {"x-api-key": TOKEN}},
        },
    )
    assert created.status_code == 201, created.text
    subscription = created.json()["id"]
    webhook_secret = created.json()["protocolsettings"]["webhooksecret"]

    sent = traced.http.post(
        "/events",
        json=event(1),
        headers={"content-type": "application/cloudevents+json", "traceparent": TRACEPARENT},
    )
    assert sent.status_code == 202
    [delivered] = sink.wait("/hook", 1)

    [publish] = receiver.wait_spans(TRACE_ID, "publish", 1)
    assert publish.parent_id == PRODUCER_SPAN
    assert publish.kind == "PRODUCER"
    assert publish.service == "broker-under-test"
    assert publish.attributes["messaging.operation.name"] == "publish"
    assert publish.attributes["cloudevents.event_id"] == "e1"
    assert publish.attributes["cloudevents.event_type"] == "t.traced"

    [attempt] = receiver.wait_spans(TRACE_ID, "send HTTP", 1)
    assert attempt.parent_id == publish.span_id
    assert (TRACE_ID, publish.span_id) in attempt.links
    assert attempt.attributes["cebroker.subscription.id"] == subscription
    assert attempt.attributes["cebroker.delivery.attempt"] == 1
    assert attempt.attributes["cebroker.delivery.outcome"] == "delivered"
    assert attempt.attributes["cebroker.circuit.state"] == "closed"
    assert attempt.attributes["server.address"] == "127.0.0.1"
    # The sink continues the trace from the attempt span.
    assert delivered.headers["traceparent"] == f"00-{TRACE_ID}-{attempt.span_id}-01"

    [match] = receiver.wait_spans(TRACE_ID, "match", 1)
    assert match.parent_id == publish.span_id
    assert match.attributes["cebroker.match.deliveries"] == 1

    # Nothing secret is exported: neither the credential, the header value nor the webhook secret.
    raw = receiver.raw()
    for secret in (TOKEN, webhook_secret, webhook_secret.removeprefix("whsec_")):
        assert secret.encode() not in raw


def test_the_events_own_traceparent_is_the_parent(traced: Broker, receiver: Receiver, sink: Sink) -> None:
    """The CloudEvents distributed tracing attribute wins over the transport's header, and each
    event of a batch gets its own publish span."""
    traced.subscribe(f"{sink.url}/hook")
    own = "0af7651916cd43dd8448eb211c80319c"
    batch = [
        event(1, traceparent=f"00-{own}-b7ad6b7169203331-01"),
        event(2),
    ]
    sent = traced.http.post(
        "/events",
        content=json.dumps(batch),
        headers={"content-type": "application/cloudevents-batch+json", "traceparent": TRACEPARENT},
    )
    assert sent.status_code == 202
    delivered = sink.wait("/hook", 2)
    [first] = receiver.wait_spans(own, "publish", 1)
    assert first.parent_id == "b7ad6b7169203331"
    assert first.attributes["messaging.batch.message_count"] == 2
    [second] = receiver.wait_spans(TRACE_ID, "publish", 1)
    assert second.parent_id == PRODUCER_SPAN
    # The event's own attribute is forwarded unchanged; the transport header is the attempt's.
    by_id = {
        json.loads(r.body)["id"] if r.body.startswith(b"{") else r.headers["ce-id"]: r for r in delivered
    }
    assert by_id["e1"].headers["ce-traceparent"] == f"00-{own}-b7ad6b7169203331-01"
    assert by_id["e1"].headers["traceparent"].split("-")[1] == own
    assert by_id["e2"].headers["traceparent"].split("-")[1] == TRACE_ID


def test_management_requests_get_server_spans_by_route_template(traced: Broker, receiver: Receiver) -> None:
    created = traced.http.post(
        "/subscriptions",
        json={"protocol": "HTTP", "sink": "http://127.0.0.1:9/x"},
        headers={"traceparent": TRACEPARENT},
    )
    subscription = created.json()["id"]
    assert (
        traced.http.get(f"/subscriptions/{subscription}", headers={"traceparent": TRACEPARENT}).status_code
        == 200
    )
    [span] = receiver.wait_spans(TRACE_ID, "GET /subscriptions/{id}", 1)
    assert span.kind == "SERVER"
    assert span.parent_id == PRODUCER_SPAN
    assert span.attributes["http.route"] == "/subscriptions/{id}"
    assert span.attributes["http.response.status_code"] == 200
    assert subscription not in span.name
    [post] = receiver.wait_spans(TRACE_ID, "POST /subscriptions", 1)
    assert post.attributes["http.response.status_code"] == 201
    # The request metrics count by template as well; the same families reach the receiver.
    metrics = traced.http.get("/metrics").text
    assert (
        'cebroker_http_server_request_duration_seconds_count{method="GET",route="/subscriptions/{id}",status="200"}'
        in metrics
    )
    for name in ("process_resident_memory_bytes", "process_open_fds", "python_gc_collections_total"):
        assert name in metrics


def test_metrics_are_exported_over_otlp(traced: Broker, receiver: Receiver) -> None:
    """The Prometheus families (the broker's, the request metrics, the process's) over OTLP."""
    assert traced.http.get("/metrics").status_code == 200
    wanted = {
        "cebroker_events_received",
        "cebroker_http_server_request_duration_seconds_count",
        "process_resident_memory_bytes",
        "process_open_fds",
    }
    wait_for(lambda: set(receiver.metrics), lambda names: wanted <= names, 20.0, f"metrics {sorted(wanted)}")


def test_json_log_lines_of_a_traced_request_carry_its_trace_id(traced: Broker) -> None:
    """The handler ``--log-format json`` configures, on the broker's own logger, during a traced
    management request that logs."""
    config = logging_config("info", "json")
    formatter_config = dict(config["formatters"]["default"])
    factory = formatter_config.pop("()")
    module, _, name = factory.rpartition(".")
    formatter_class = getattr(__import__(module, fromlist=[name]), name)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter_class(**formatter_config))
    handler.addFilter(TraceFields())
    logger = logging.getLogger("cebroker")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        created = traced.http.post(
            "/subscriptions",
            json={"protocol": "HTTP", "sink": "http://127.0.0.1:9/x"},
            headers={"traceparent": TRACEPARENT},
        )
        assert created.status_code == 201
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [line] = [line for line in lines if "created" in line["message"]]
    assert line["trace_id"] == TRACE_ID
    assert len(line["span_id"]) == 16
    assert line["span_id"] != PRODUCER_SPAN


def test_with_telemetry_off_deliveries_carry_no_context_of_the_broker(broker: Broker, sink: Sink) -> None:
    """Off by default: no span, so no ``traceparent`` header of the broker's own; the event's
    distributed-tracing attribute is still forwarded unchanged (``ce-traceparent``)."""
    broker.subscribe(f"{sink.url}/hook")
    own = f"00-{TRACE_ID}-{PRODUCER_SPAN}-01"
    sent = broker.http.post(
        "/events",
        json=event(1, traceparent=own),
        headers={"content-type": "application/cloudevents+json", "traceparent": TRACEPARENT},
    )
    assert sent.status_code == 202
    [delivered] = sink.wait("/hook", 1)
    assert "traceparent" not in delivered.headers
    assert delivered.headers["ce-traceparent"] == own


def test_request_metrics_are_bounded_by_template_and_known_methods(broker: Broker) -> None:
    """Raw paths and made-up methods never become series of their own."""
    for n in range(3):
        assert broker.http.request("PROPFIND", f"/subscriptions/x{n}").status_code == 405
        assert broker.http.get(f"/no/such/{n}").status_code == 404
    metrics = broker.http.get("/metrics").text
    name = "cebroker_http_server_request_duration_seconds_count"
    assert f'{name}{{method="_OTHER",route="/subscriptions/{{id}}",status="405"}} 3.0' in metrics
    assert f'{name}{{method="GET",route="(unmatched)",status="404"}} 3.0' in metrics
    assert "PROPFIND" not in metrics
    assert "/no/such" not in metrics


def test_a_batch_delivery_is_one_attempt_span_linked_to_every_event(
    traced: Broker, receiver: Receiver, sink: Sink
) -> None:
    traced.subscribe(
        f"{sink.url}/batch",
        protocolsettings={"contentmode": "batch"},
        config={"maxbatchsize": "10", "maxbatchdelay": "0.3"},
        source="/tests",
    )
    others = ["1af7651916cd43dd8448eb211c80319c", "2af7651916cd43dd8448eb211c80319c"]
    batch = [
        event(1),
        *(event(n + 2, traceparent=f"00-{t}-b7ad6b7169203331-01") for n, t in enumerate(others)),
    ]
    sent = traced.http.post(
        "/events",
        content=json.dumps(batch),
        headers={"content-type": "application/cloudevents-batch+json", "traceparent": TRACEPARENT},
    )
    assert sent.status_code == 202
    got = wait_for(
        lambda: sink.at("/batch"),
        lambda got: sum(len(json.loads(r.body)) for r in got) >= 3,
        20.0,
        "the three events in batches",
    )
    publishes = {trace_id: receiver.wait_spans(trace_id, "publish", 1)[0] for trace_id in (TRACE_ID, *others)}
    attempts = wait_for(
        lambda: [
            s
            for s in receiver.named("send HTTP")
            if s.span_id in {r.headers["traceparent"][36:52] for r in got}
        ],
        lambda found: len(found) == len(got),
        20.0,
        "an attempt span per batch request",
    )
    linked = {link for span in attempts for link in span.links}
    for trace_id, publish in publishes.items():
        assert (trace_id, publish.span_id) in linked
    for span, request in zip(
        sorted(attempts, key=lambda s: s.span_id),
        sorted(got, key=lambda r: r.headers["traceparent"][36:52]),
        strict=True,
    ):
        assert span.attributes["cebroker.delivery.outcome"] == "delivered"
        assert span.attributes.get("messaging.batch.message_count", 1) == len(json.loads(request.body))
        assert request.headers["traceparent"] == f"00-{span.trace_id}-{span.span_id}-01"
