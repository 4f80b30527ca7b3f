"""The official ``azure-eventgrid`` client against cebroker's Event Grid namespace routes
(docs/eventgrid.md), over HTTPS with an API key sent as ``SharedAccessKey``: publish, receive,
acknowledge, release with a delay, reject and renew; the results match the native API's."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.core.messaging import CloudEvent
from azure.eventgrid import EventGridConsumerClient, EventGridPublisherClient
from security.support import write_api_keys
from support.broker import BrokerProcess, BrokerProcesses
from support.tls import self_signed
from support.waiting import wait_until

from cebroker.principal import EVENTS_PUBLISH, EVENTS_RECEIVE, SUBSCRIPTIONS_READ, SUBSCRIPTIONS_WRITE

TOPIC = "orders"


class Served:
    """A TLS broker process with API keys, its trust anchor and an admin client."""

    def __init__(self, process: BrokerProcess, cert: Path, keys: dict[str, str]) -> None:
        self.url = process.url.replace("http://", "https://")
        self.cert = cert
        self.keys = keys
        self.http = httpx.Client(
            base_url=self.url,
            verify=ssl.create_default_context(cafile=str(cert)),
            timeout=30,
            headers={"authorization": f"Bearer {keys['consumer']}"},
        )

    def consumer(self, subscription: str, key: str = "consumer") -> EventGridConsumerClient:
        return EventGridConsumerClient(
            self.url,
            AzureKeyCredential(self.keys[key]),
            namespace_topic=TOPIC,
            subscription=subscription,
            connection_verify=str(self.cert),
        )


@pytest.fixture
def served(tmp_path: Path, broker_processes: BrokerProcesses) -> Iterator[Served]:
    cert, key = self_signed(tmp_path)
    scopes = [SUBSCRIPTIONS_READ, SUBSCRIPTIONS_WRITE, EVENTS_PUBLISH, EVENTS_RECEIVE]
    keys = write_api_keys(
        tmp_path / "keys.json",
        [
            {"id": "consumer", "tenant": "acme", "scopes": scopes},
            {"id": "other", "tenant": "globex", "scopes": scopes},
        ],
    )
    process = broker_processes(
        tmp_path / "eg.db",
        "eg.log",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--api-keys",
        str(tmp_path / "keys.json"),
    ).start()
    result = Served(process, cert, keys)

    def ready() -> bool:
        try:
            return result.http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    wait_until(ready, 30, "the TLS broker to answer")
    yield result
    result.http.close()


def test_the_azure_client_publishes_receives_and_settles(served: Served) -> None:
    created = served.http.post(
        "/subscriptions", json={"protocol": "PULL", "protocolsettings": {"lockduration": 30}}
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    publisher = EventGridPublisherClient(
        served.url,
        AzureKeyCredential(served.keys["consumer"]),
        namespace_topic=TOPIC,
        connection_verify=str(served.cert),
    )
    publisher.send(CloudEvent(source="/eg", type="com.example.one", data={"n": 0}, id="eg-0"))
    publisher.send(
        [CloudEvent(source="/eg", type="com.example.many", data={"n": n}, id=f"eg-{n}") for n in (1, 2, 3)]
    )
    consumer = served.consumer(sid)

    got = consumer.receive(max_events=10, max_wait_time=10)
    assert sorted(d.event.id for d in got) == ["eg-0", "eg-1", "eg-2", "eg-3"]
    assert {d.broker_properties.delivery_count for d in got} == {1}
    by_id = {d.event.id: d.broker_properties.lock_token for d in got}
    assert got[0].event.data == {"n": int(got[0].event.id[-1])}

    acked = consumer.acknowledge(lock_tokens=[by_id["eg-0"], "not-a-token"])
    assert acked.succeeded_lock_tokens == [by_id["eg-0"]]
    assert [(f.lock_token, f.error.code) for f in acked.failed_lock_tokens] == [
        ("not-a-token", "TokenNotFound")
    ]
    again = consumer.acknowledge(lock_tokens=[by_id["eg-0"]])
    assert [f.error.code for f in again.failed_lock_tokens] == ["TokenAlreadySettled"]

    renewed = consumer.renew_locks(lock_tokens=[by_id["eg-1"]])
    assert renewed.succeeded_lock_tokens == [by_id["eg-1"]]
    released = consumer.release(lock_tokens=[by_id["eg-1"]], release_delay=10)
    assert released.succeeded_lock_tokens == [by_id["eg-1"]]
    rejected = consumer.reject(lock_tokens=[by_id["eg-2"]])
    assert rejected.succeeded_lock_tokens == [by_id["eg-2"]]
    assert consumer.acknowledge(lock_tokens=[by_id["eg-3"]]).succeeded_lock_tokens == [by_id["eg-3"]]

    # The released event waits for its delay, then comes back with its count one higher.
    started = time.monotonic()
    (back,) = consumer.receive(max_events=10, max_wait_time=30)
    assert (back.event.id, back.broker_properties.delivery_count) == ("eg-1", 2)
    assert time.monotonic() - started >= 5
    assert consumer.acknowledge(lock_tokens=[back.broker_properties.lock_token]).failed_lock_tokens == []

    # The native API saw the same: one dead letter (the rejected one), three delivered.
    status = served.http.get(f"/subscriptions/{sid}/status").json()
    assert (status["delivered"], status["deadlettered"], status["pending"]) == (3, 1, 0)


def test_keys_and_tenants_are_checked(served: Served) -> None:
    sid = served.http.post("/subscriptions", json={"protocol": "PULL"}).json()["id"]
    with pytest.raises(HttpResponseError) as found:
        served.consumer(sid, key="other").receive(max_events=1, max_wait_time=0)
    assert found.value.status_code == 404  # another tenant's subscription
    served.keys["wrong"] = "cbk_wrong"
    with pytest.raises(ClientAuthenticationError):
        served.consumer(sid, key="wrong").receive(max_events=1, max_wait_time=0)
    r = served.http.post(f"/topics/{TOPIC}/eventsubscriptions/{sid}:receive")
    assert r.status_code == 400
    assert "api-version" in r.text
