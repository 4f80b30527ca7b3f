"""Sink credentials and the webhook validation handshake, against real HTTP servers.

Subscriptions API 3.2.3 ``sinkcredential`` (PLAIN, ACCESSTOKEN, REFRESHTOKEN); RFC 6749
section 6 (refresh_token grant); HTTP 1.1 Web Hooks for Event Delivery section 4 (abuse
protection: OPTIONS, WebHook-Request-Origin, WebHook-Allowed-Origin, WebHook-Allowed-Rate).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

import pytest
from support.broker import Broker
from support.events import event
from support.servers import ServerThread
from support.sinks import Received, Reply, Sink
from support.waiting import wait_until

FAST = {"initialdelay": "0.05", "maxdelay": "0.2"}


def _future(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_plain_credential_is_http_basic(broker: Broker, sink: Sink) -> None:
    """PLAIN: identifier and secret as HTTP Basic."""
    broker.subscribe(
        f"{sink.url}/basic", sinkcredential={"credentialtype": "PLAIN", "identifier": "u", "secret": "p:w"}
    )
    broker.send(event(1))
    (got,) = sink.wait("/basic", 1)
    assert got.headers["authorization"] == "Basic " + base64.b64encode(b"u:p:w").decode()


def test_access_token_is_sent_and_expired_one_fails(broker: Broker, sink: Sink) -> None:
    """ACCESSTOKEN: ``<type> <token>``; once expired, deliveries fail to the dead letter."""
    cred = {"credentialtype": "ACCESSTOKEN", "accesstoken": "tok", "accesstokentype": "bearer"}
    broker.subscribe(f"{sink.url}/at", sinkcredential={**cred, "accesstokenexpiresutc": _future(3600)})
    expired = broker.subscribe(
        f"{sink.url}/old", sinkcredential={**cred, "accesstokenexpiresutc": "2020-01-01T00:00:00Z"}
    )
    broker.send(event(1))
    (got,) = sink.wait("/at", 1)
    assert got.headers["authorization"] == "Bearer tok"
    url = f"/subscriptions/{expired['id']}/deadletters"
    (dead,) = wait_until(lambda: broker.http.get(url).json()["items"])
    assert "expired" in dead["lastError"]
    assert sink.at("/old") == []


class TokenEndpoint:
    """An OAuth 2.0 token endpoint granting ``access-<n>`` for the refresh token ``r1``."""

    def __init__(self) -> None:
        self.sink = Sink()
        self.issued = 0

        def grant(request: Received) -> Reply:
            form = parse_qs(request.body.decode())
            if form.get("grant_type") != ["refresh_token"] or form.get("refresh_token") != ["r1"]:
                return Reply(400, body=b'{"error":"invalid_grant"}')
            self.issued += 1
            body = f'{{"access_token":"access-{self.issued}","token_type":"Bearer","expires_in":3600}}'
            return Reply(200, headers={"content-type": "application/json"}, body=body.encode())

        self.sink.responder = grant


@pytest.fixture
def token_endpoint() -> Iterator[tuple[TokenEndpoint, str]]:
    endpoint = TokenEndpoint()
    with ServerThread(endpoint.sink) as server:
        yield endpoint, f"{server.url}/token"


@pytest.mark.parametrize("field", ["refreshtokenendpoint", "refreshtokenurl"])
def test_refresh_token_is_exchanged_cached_and_refreshed_on_401(
    broker: Broker, sink: Sink, token_endpoint: tuple[TokenEndpoint, str], field: str
) -> None:
    """REFRESHTOKEN: an expired access token is refreshed once and cached; a 401 refreshes again
    (under either spelling of the token endpoint's field)."""
    endpoint, url = token_endpoint
    cred = {
        "credentialtype": "REFRESHTOKEN",
        "accesstoken": "stale",
        "accesstokentype": "Bearer",
        "accesstokenexpiresutc": "2020-01-01T00:00:00Z",
        "refreshtoken": "r1",
        field: url,
    }
    broker.subscribe(f"{sink.url}/oauth", sinkcredential=cred, config=FAST)
    broker.send(event(1))
    broker.send(event(2))
    got = sink.wait("/oauth", 2)
    assert {g.headers["authorization"] for g in got} == {"Bearer access-1"}
    assert endpoint.issued == 1
    # The sink now rejects the cached token once: the sender refreshes and tries again at once.
    sink.scripts["/oauth"] = [Reply(401)]
    broker.send(event(3))
    got = sink.wait("/oauth", 4)
    assert got[2].headers["authorization"] == "Bearer access-1"
    assert got[3].headers["authorization"] == "Bearer access-2"
    assert endpoint.issued == 2


def test_both_plain_spellings_send_the_same_basic_header(broker: Broker, sink: Sink) -> None:
    """PLAIN under ``identifier`` or its alias ``identity``: the same ``Authorization`` header."""
    for field in ("identifier", "identity"):
        sub = broker.subscribe(
            f"{sink.url}/{field}", sinkcredential={"credentialtype": "PLAIN", field: "svc", "secret": "pw"}
        )
        assert sub["sinkcredential"] == {"credentialtype": "PLAIN", field: "svc"}
    broker.send(event(1))
    (spec,) = sink.wait("/identifier", 1)
    (alias,) = sink.wait("/identity", 1)
    expected = "Basic " + base64.b64encode(b"svc:pw").decode()
    assert spec.headers["authorization"] == alias.headers["authorization"] == expected


def test_both_refresh_endpoint_spellings_share_one_token(
    broker: Broker, sink: Sink, token_endpoint: tuple[TokenEndpoint, str]
) -> None:
    """REFRESHTOKEN under ``refreshtokenendpoint`` or its alias ``refreshtokenurl``: the grant goes
    to the same endpoint, and the two credentials, equal once read canonically, share its token."""
    endpoint, url = token_endpoint
    base = {
        "credentialtype": "REFRESHTOKEN",
        "accesstoken": "stale",
        "accesstokentype": "Bearer",
        "accesstokenexpiresutc": "2020-01-01T00:00:00Z",
        "refreshtoken": "r1",
    }
    for field in ("refreshtokenendpoint", "refreshtokenurl"):
        sub = broker.subscribe(f"{sink.url}/{field}", sinkcredential={**base, field: url}, config=FAST)
        assert sub["sinkcredential"][field] == url
    broker.send(event(1))
    (spec,) = sink.wait("/refreshtokenendpoint", 1)
    (alias,) = sink.wait("/refreshtokenurl", 1)
    assert spec.headers["authorization"] == alias.headers["authorization"] == "Bearer access-1"
    assert endpoint.issued == 1


def test_refused_refresh_goes_to_the_dead_letter(
    broker: Broker, sink: Sink, token_endpoint: tuple[TokenEndpoint, str]
) -> None:
    """A token endpoint that refuses the grant (400) makes the delivery fail for good."""
    _, url = token_endpoint
    cred = {
        "credentialtype": "REFRESHTOKEN",
        "accesstoken": "x",
        "accesstokentype": "Bearer",
        "accesstokenexpiresutc": "2020-01-01T00:00:00Z",
        "refreshtoken": "wrong",
        "refreshtokenendpoint": url,
    }
    sub = broker.subscribe(f"{sink.url}/never", sinkcredential=cred, config=FAST)
    broker.send(event(1))
    (dead,) = wait_until(lambda: broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"])
    assert dead["status"] == "400"
    assert sink.at("/never") == []


def test_handshake_allowed_then_delivered_with_origin(make_broker: Callable[..., Broker], sink: Sink) -> None:
    """Validation on: OPTIONS with WebHook-Request-Origin first (once per origin), then delivery."""
    broker = make_broker(webhook_validation=True, base_url="http://broker.example:8080")
    broker.subscribe(f"{sink.url}/hook")
    broker.subscribe(f"{sink.url}/hook2")
    for i in range(3):
        broker.send(event(i))
    got = sink.wait("/hook", 3)
    sink.wait("/hook2", 3)
    assert len(sink.options) == 1
    assert sink.options[0].headers["webhook-request-origin"] == "broker.example"
    assert all(g.headers["webhook-request-origin"] == "broker.example" for g in got)


def test_handshake_refused_means_no_delivery(make_broker: Callable[..., Broker], sink: Sink) -> None:
    """A sink that answers OPTIONS without WebHook-Allowed-Origin gets nothing (dead letter)."""
    broker = make_broker(webhook_validation=True)
    sink.grant["/closed"] = {}
    sub = broker.subscribe(f"{sink.url}/closed", config=FAST)
    broker.send(event(1))
    (dead,) = wait_until(lambda: broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"])
    assert "did not grant" in dead["lastError"]
    assert sink.at("/closed") == []


def test_allowed_rate_caps_deliveries(make_broker: Callable[..., Broker], sink: Sink) -> None:
    """WebHook-Allowed-Rate: 120 per minute (2/s) spaces deliveries after the first burst."""
    broker = make_broker(webhook_validation=True)
    sink.grant["/rated"] = {"WebHook-Allowed-Origin": "*", "WebHook-Allowed-Rate": "120"}
    broker.subscribe(f"{sink.url}/rated")
    started = time.monotonic()
    for i in range(5):
        broker.send(event(i))
    sink.wait("/rated", 5)
    # Burst of 2, then 3 more at 2/s: at least ~1.5 s.
    assert time.monotonic() - started >= 1.3
