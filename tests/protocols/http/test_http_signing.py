"""Signed HTTP deliveries (Standard Webhooks), verified by the ``standardwebhooks`` library.

The sink is a real HTTP server on 127.0.0.1 that checks every request it receives with
``standardwebhooks.Webhook(secret).verify`` for each secret it knows and answers 400 when none
verifies, so a wrong signature also fails the delivery. It records the raw header list, so a
header sent twice would be seen.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from ceprotocols.errors import DeliveryRejected, SettingsError
from ceprotocols.http import HttpSender
from ceprotocols.sender import Destination
from ceprotocols.signing import (
    WebhookSecret,
    WebhookSigning,
    generate_webhook_secret,
    parse_webhook_secret,
    signature,
    webhook_id,
)
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from starlette.types import Receive, Scope, Send
from support.servers import ServerThread

from protocols.ce_samples import make_event

OLD = generate_webhook_secret()
NEW = generate_webhook_secret(48)
STRANGER = generate_webhook_secret()


@dataclass
class Seen:
    """One request as the verifying sink saw it."""

    headers: list[tuple[str, str]]
    body: bytes
    verified_by: list[str] = field(default_factory=list)

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


class VerifyingSink:
    """An ASGI sink that verifies each request with every secret in ``secrets``; answers the
    next status of ``statuses`` (then 204) when at least one verifies, 400 otherwise (unless
    ``required`` is off, for bodies the library cannot read)."""

    def __init__(self) -> None:
        self.required = True
        self.secrets: list[str] = []
        self.statuses: list[int] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        seen = Seen(headers, body)
        for secret in self.secrets:
            try:
                Webhook(secret).verify(body, dict(headers), json_parse=False)
            except WebhookVerificationError:
                continue
            seen.verified_by.append(secret)
        with self._lock:
            self.seen.append(seen)
            accepted = bool(seen.verified_by) or not self.required
            status = (self.statuses.pop(0) if self.statuses else 204) if accepted else 400
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def sink() -> Iterator[tuple[VerifyingSink, str]]:
    app = VerifyingSink()
    with ServerThread(app) as server:
        yield app, f"{server.url}/hook"


def signed(url: str, *secrets: str, subscription: str = "sub-1", **settings: Any) -> Destination:
    return Destination(
        protocol="HTTP",
        sink=url,
        settings=settings,
        webhook=WebhookSigning(subscription, tuple(parse_webhook_secret(s) for s in secrets)),
    )


async def deliver(destination: Destination, event: dict[str, Any]) -> None:
    sender = HttpSender(validate_webhooks=False)
    try:
        await sender.deliver(event, destination)
    finally:
        await sender.aclose()


@pytest.mark.parametrize("mode", ["binary", "structured"])
@pytest.mark.parametrize("payload", ["json-object", "text", "no-data"])
async def test_every_delivery_verifies(sink: tuple[VerifyingSink, str], mode: str, payload: str) -> None:
    app, url = sink
    app.secrets = [OLD]
    event = make_event(payload)
    before = int(time.time())
    await deliver(signed(url, OLD, contentmode=mode), event)
    (seen,) = app.seen
    assert seen.verified_by == [OLD]
    assert seen.header("webhook-id") == [webhook_id("sub-1", event)]
    (stamp,) = seen.header("webhook-timestamp")
    assert before <= int(stamp) <= int(time.time())
    (value,) = seen.header("webhook-signature")
    assert value.startswith("v1,")
    assert " " not in value


async def test_rotation_carries_both_signatures(sink: tuple[VerifyingSink, str]) -> None:
    """Before the rotation the old secret verifies; during it the header holds one signature per
    secret and each secret verifies on its own; a secret the broker never had does not."""
    app, url = sink
    app.secrets = [OLD, NEW, STRANGER]
    await deliver(signed(url, OLD), make_event())
    await deliver(signed(url, NEW, OLD), make_event())
    before, during = app.seen
    assert before.verified_by == [OLD]
    assert during.verified_by == [OLD, NEW]
    (value,) = during.header("webhook-signature")
    assert len(value.split(" ")) == 2
    new_only = Webhook(NEW)
    with pytest.raises(WebhookVerificationError):
        new_only.verify(before.body, dict(before.headers), json_parse=False)


async def test_retries_of_one_delivery_keep_their_id(sink: tuple[VerifyingSink, str]) -> None:
    """A 503 then a 204: two attempts, one webhook-id, each attempt signed for its own
    timestamp; the same event for another subscription gets another id."""
    app, url = sink
    app.secrets = [OLD]
    app.statuses = [503]
    event = make_event()
    sender = HttpSender(validate_webhooks=False)
    try:
        with pytest.raises(DeliveryRejected) as first:
            await sender.deliver(event, signed(url, OLD))
        assert first.value.retryable
        await sender.deliver(event, signed(url, OLD))
        await sender.deliver(event, signed(url, OLD, subscription="sub-2"))
    finally:
        await sender.aclose()
    attempt1, attempt2, other = app.seen
    assert attempt1.verified_by == attempt2.verified_by == other.verified_by == [OLD]
    assert attempt1.header("webhook-id") == attempt2.header("webhook-id")
    assert other.header("webhook-id") != attempt1.header("webhook-id")


async def test_a_signed_batch_verifies_and_its_retry_keeps_its_id(sink: tuple[VerifyingSink, str]) -> None:
    """A batch is signed over its whole body; a retry of the same events keeps the id, another
    set of events gets another."""
    app, url = sink
    app.secrets = [OLD]
    app.statuses = [503]
    events = [make_event(), {**make_event(), "id": "second"}]
    sender = HttpSender(validate_webhooks=False)
    try:
        with pytest.raises(DeliveryRejected):
            await sender.deliver_batch(events, signed(url, OLD, contentmode="batch"))
        await sender.deliver_batch(events, signed(url, OLD, contentmode="batch"))
        await sender.deliver_batch(events[:1], signed(url, OLD, contentmode="batch"))
    finally:
        await sender.aclose()
    first, retry, other = app.seen
    assert first.verified_by == retry.verified_by == other.verified_by == [OLD]
    assert first.header("webhook-id") == retry.header("webhook-id") != other.header("webhook-id")
    assert [e["id"] for e in json.loads(retry.body)] == [e["id"] for e in events]


async def test_settings_cannot_forge_the_signature_headers(sink: tuple[VerifyingSink, str]) -> None:
    app, url = sink
    app.secrets = [OLD]
    forged = {"Webhook-Signature": "v1,Zm9yZ2Vk", "WEBHOOK-ID": "msg_forged", "x-team": "a"}
    await deliver(signed(url, OLD, headers=forged), make_event())
    (seen,) = app.seen
    assert seen.verified_by == [OLD]
    assert len(seen.header("webhook-signature")) == 1
    assert seen.header("webhook-id") != ["msg_forged"]
    assert seen.header("x-team") == ["a"]


async def test_signature_covers_the_exact_bytes_of_a_binary_body(sink: tuple[VerifyingSink, str]) -> None:
    """A binary payload that is not UTF-8: the signature is over the bytes as sent (the
    ``standardwebhooks`` library decodes bodies as text, so the HMAC is recomputed here)."""
    app, url = sink
    app.required = False
    event = {**make_event("no-data"), "datacontenttype": "application/octet-stream"}
    event["data_base64"] = base64.b64encode(b"\xff\xfe\x00binary").decode()
    await deliver(signed(url, OLD), event)
    (seen,) = app.seen
    assert seen.body == b"\xff\xfe\x00binary"
    (message_id,) = seen.header("webhook-id")
    (stamp,) = seen.header("webhook-timestamp")
    key = base64.b64decode(OLD.removeprefix("whsec_"))
    expected = hmac.new(key, f"{message_id}.{stamp}.".encode() + seen.body, hashlib.sha256).digest()
    assert seen.header("webhook-signature") == ["v1," + base64.b64encode(expected).decode()]


async def test_unsigned_destinations_carry_no_signature(sink: tuple[VerifyingSink, str]) -> None:
    app, url = sink
    app.secrets = [OLD]
    with pytest.raises(DeliveryRejected) as refused:
        await deliver(Destination(protocol="HTTP", sink=url), make_event())
    assert refused.value.status == 400  # the verifying sink refuses what it cannot verify
    (seen,) = app.seen
    assert not any(name.startswith("webhook-") for name, _ in seen.headers)


# -- the pure helpers ---------------------------------------------------------------------------------


def test_signature_matches_the_reference_library() -> None:
    import datetime

    body = b'{"specversion":"1.0","id":"1"}'
    ours = signature((parse_webhook_secret(NEW),), "msg_x", 1_700_000_000, body)
    stamp = datetime.datetime.fromtimestamp(1_700_000_000, tz=datetime.UTC)
    assert ours == Webhook(NEW).sign("msg_x", stamp, body.decode())


@pytest.mark.parametrize("size", [24, 32, 64])
def test_secrets_of_24_to_64_bytes_parse(size: int) -> None:
    text = generate_webhook_secret(size)
    assert text.startswith("whsec_")
    assert len(parse_webhook_secret(text).key) == size
    unpadded = "whsec_" + base64.b64encode(b"k" * 32).decode().rstrip("=")
    assert parse_webhook_secret(unpadded).key == b"k" * 32


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", "starts with 'whsec_'"),
        ("whsec_not*base64!!", "standard base64"),
        ("whsec_" + base64.b64encode(b"s" * 23).decode(), "24 to 64 bytes"),
        ("whsec_" + base64.b64encode(b"s" * 65).decode(), "24 to 64 bytes"),
    ],
)
def test_bad_secrets_are_refused_without_repeating_them(text: str, reason: str) -> None:
    with pytest.raises(SettingsError) as refused:
        parse_webhook_secret(text)
    assert refused.value.field == "protocolsettings.webhooksecret"
    assert reason in str(refused.value)
    assert text.removeprefix("whsec_")[:8] not in str(refused.value)


def test_secrets_never_show_in_reprs() -> None:
    secret = parse_webhook_secret(OLD)
    destination = Destination(
        protocol="HTTP",
        sink="http://example.test/",
        credential={"credentialtype": "PLAIN", "identifier": "u", "secret": "hunter2"},
        webhook=WebhookSigning("s", (secret,)),
    )
    shown = f"{secret!r} {destination!r} {WebhookSigning('s', (secret,))!r}"
    assert "redacted" in repr(secret)
    assert "hunter2" not in shown
    assert repr(secret.key) not in shown
    assert OLD.removeprefix("whsec_") not in shown


def test_generated_secrets_differ_and_sizes_are_bounded() -> None:
    assert len({generate_webhook_secret() for _ in range(20)}) == 20
    with pytest.raises(ValueError, match="24 to 64"):
        generate_webhook_secret(16)
    with pytest.raises(SettingsError):
        WebhookSecret(b"short")
    with pytest.raises(ValueError, match="at least one"):
        WebhookSigning("s", ())


def test_webhook_id_is_stable_and_scoped() -> None:
    event = {"source": "/s", "id": "1"}
    assert webhook_id("a", event) == webhook_id("a", dict(event))
    assert webhook_id("a", event) != webhook_id("b", event)
    assert webhook_id("a", event) != webhook_id("a", {"source": "/t", "id": "1"})
    assert webhook_id("a", event).startswith("msg_")
