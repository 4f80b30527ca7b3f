"""Every Subscriptions API operation over HTTP (spec 3.2.5 "API Operations" and its HTTP
placeholders), in process against the real app and a SQLite file."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from storage.faults import faulty_connection

from api.bodies import VALID, create, http_sub
from cebroker.app import build_components, create_app
from cebroker.settings import Settings
from cebroker.storage import ChangeKind, SubscriptionChange
from cebroker.storage.sqlite import SqliteStorage


async def test_create_returns_realized_subscription(client: httpx.AsyncClient) -> None:
    """3.2.5.1 Create: 201, server-assigned id (request id ignored), Location, ETag, defaults applied."""
    body = http_sub(
        id="mine", source="/src", types=["com.x"], config={"k": [1]}, filters=[{"prefix": {"type": "com."}}]
    )
    r = await client.post("/subscriptions", json=body)
    assert r.status_code == 201
    doc = r.json()
    assert doc["id"] != "mine"
    assert uuid.UUID(doc["id"]).version == 4
    assert r.headers["location"] == f"/subscriptions/{doc['id']}"
    assert r.headers["etag"] == f'"{doc["id"]}-1"'
    assert r.headers["content-type"] == "application/json"
    assert doc == {
        "id": doc["id"],
        "source": "/src",
        "types": ["com.x"],
        "config": {"k": [1]},
        "filters": [{"prefix": {"type": "com."}}],
        "sink": "https://sink.example/events",
        "protocol": "HTTP",
        "protocolsettings": {"method": "POST", "contentmode": "binary"},
    }


@pytest.mark.parametrize(
    ("protocol", "defaults"),
    [
        ("HTTP", {"method": "POST", "contentmode": "binary"}),
        # MQTT 3.1.1 has no headers: structured is its only content mode (MQTT binding 3.1)
        ("MQTT3", {"topicname": "t/1", "qos": 1, "retain": False, "contentmode": "structured"}),
        ("MQTT5", {"topicname": "t/1", "qos": 1, "retain": False, "contentmode": "binary"}),
        ("AMQP", {"sendersettlementmode": "unsettled", "contentmode": "binary"}),
        ("KAFKA", {"topicname": "ev", "acks": "all", "contentmode": "binary"}),
        ("NATS", {"subject": "ev.x", "contentmode": "binary"}),
    ],
)
async def test_protocol_defaults_are_applied(
    client: httpx.AsyncClient, protocol: str, defaults: dict[str, object]
) -> None:
    """3.2.2: each protocol's documented defaults appear in the realized subscription."""
    doc = await create(client, VALID[protocol])
    assert doc["protocolsettings"] == defaults
    assert doc["config"] == {}
    assert doc["filters"] == []


async def test_given_settings_win_over_defaults(client: httpx.AsyncClient) -> None:
    doc = await create(
        client,
        {
            "protocol": "MQTT5",
            "sink": "mqtts://b:8883",
            "protocolsettings": {"topicname": "a", "qos": 0, "retain": True, "contentmode": "structured"},
        },
    )
    assert doc["protocolsettings"] == {
        "topicname": "a",
        "qos": 0,
        "retain": True,
        "contentmode": "structured",
    }


async def test_cloudevents_subscription_media_type_is_accepted(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/subscriptions",
        content=b'{"protocol": "HTTP", "sink": "http://h/x"}',
        headers={"content-type": "application/cloudevents-subscription+json; charset=utf-8"},
    )
    assert r.status_code == 201, r.text


async def test_filter_alias_becomes_filters_array(client: httpx.AsyncClient) -> None:
    """The HTTP placeholder's single ``filter`` object is accepted as a one-element ``filters``."""
    doc = await create(client, http_sub(filter={"exact": {"type": "com.a"}}))
    assert doc["filters"] == [{"exact": {"type": "com.a"}}]
    assert "filter" not in doc


async def test_retrieve_and_404(client: httpx.AsyncClient) -> None:
    """3.2.5 Retrieve: 200 with ETag, 404 problem+json for an unknown id."""
    doc = await create(client, http_sub())
    r = await client.get(f"/subscriptions/{doc['id']}")
    assert r.status_code == 200
    assert r.json() == doc
    assert r.headers["etag"] == f'"{doc["id"]}-1"'
    missing = await client.get("/subscriptions/nope")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json()["status"] == 404


async def test_head_mirrors_get_without_body(client: httpx.AsyncClient) -> None:
    doc = await create(client, http_sub())
    get = await client.get(f"/subscriptions/{doc['id']}")
    head = await client.head(f"/subscriptions/{doc['id']}")
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["etag"] == get.headers["etag"]
    assert head.headers["content-length"] == get.headers["content-length"]
    assert (await client.head("/subscriptions")).status_code == 200


async def test_secrets_never_returned(client: httpx.AsyncClient) -> None:
    """3.2.3: secrets are write-only: absent from create, retrieve, query, replace and delete answers."""
    cred = {
        "credentialtype": "REFRESHTOKEN",
        "accesstoken": "AT-SECRET-1",
        "accesstokenexpiresutc": "2030-01-01T00:00:00Z",
        "accesstokentype": "bearer",
        "refreshtoken": "RT-SECRET-2",
        "refreshtokenendpoint": "https://auth.example/token",
    }
    created = await client.post("/subscriptions", json=http_sub(sinkcredential=cred))
    sid = created.json()["id"]
    answers = [
        created,
        await client.get(f"/subscriptions/{sid}"),
        await client.get("/subscriptions"),
        await client.put(f"/subscriptions/{sid}", json=http_sub(sinkcredential=cred)),
        await client.delete(f"/subscriptions/{sid}"),
    ]
    for r in answers:
        assert r.status_code in (200, 201)
        assert "SECRET" not in r.text
    assert answers[1].json()["sinkcredential"] == {
        "credentialtype": "REFRESHTOKEN",
        "accesstokenexpiresutc": "2030-01-01T00:00:00Z",
        "accesstokentype": "bearer",
        "refreshtokenendpoint": "https://auth.example/token",
    }


async def test_replace_updates_and_bumps_etag(client: httpx.AsyncClient) -> None:
    """3.2.5 Update (PUT): 200 with the realized subscription; ETag changes; same id kept."""
    doc = await create(client, http_sub(types=["a"]))
    sid = doc["id"]
    r = await client.put(f"/subscriptions/{sid}", json=http_sub(id=sid, types=["b"]))
    assert r.status_code == 200
    assert r.json()["types"] == ["b"]
    assert r.json()["id"] == sid
    assert r.headers["etag"] == f'"{sid}-2"'
    assert (await client.get(f"/subscriptions/{sid}")).json()["types"] == ["b"]
    # the body may also leave the id out
    assert (await client.put(f"/subscriptions/{sid}", json=http_sub())).status_code == 200


async def test_replace_unknown_is_404_and_creates_nothing(client: httpx.AsyncClient) -> None:
    r = await client.put("/subscriptions/unknown", json=http_sub())
    assert r.status_code == 404
    assert (await client.get("/subscriptions")).json() == []


async def test_replace_with_other_id_in_body_is_400(client: httpx.AsyncClient) -> None:
    doc = await create(client, http_sub())
    r = await client.put(f"/subscriptions/{doc['id']}", json=http_sub(id="other"))
    assert r.status_code == 400
    assert r.json()["errors"] == [
        {"pointer": "/id", "detail": "must equal the id in the URL (or be left out)"}
    ]


async def test_delete_returns_the_deleted_subscription(client: httpx.AsyncClient) -> None:
    """3.2.5 Delete: 200 with the subscription as it was; then 404."""
    doc = await create(client, http_sub())
    r = await client.delete(f"/subscriptions/{doc['id']}")
    assert r.status_code == 200
    assert r.json() == doc
    assert (await client.get(f"/subscriptions/{doc['id']}")).status_code == 404
    assert (await client.delete(f"/subscriptions/{doc['id']}")).status_code == 404


@pytest.mark.parametrize("method", ["put", "delete"])
async def test_if_match(client: httpx.AsyncClient, method: str) -> None:
    """ETag/If-Match (RFC 9110 13.1.1): a stale or weak tag gives 412 and changes nothing; the
    current tag, a list holding it, or * lets the write through."""
    doc = await create(client, http_sub(types=["a"]))
    sid = doc["id"]
    path = f"/subscriptions/{sid}"

    async def call(if_match: str) -> httpx.Response:
        headers = {"If-Match": if_match}
        if method == "put":
            return await client.put(path, json=http_sub(types=["b"]), headers=headers)
        return await client.delete(path, headers=headers)

    for stale in (f'"{sid}-9"', f'W/"{sid}-1"', '"x", "y"'):
        r = await call(stale)
        assert r.status_code == 412, stale
        assert r.headers["content-type"] == "application/problem+json"
    assert (await client.get(path)).json()["types"] == ["a"]
    bad = await call("not-a-tag")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["header"] == "If-Match"
    ok = await call(f'"other", "{sid}-1"')
    assert ok.status_code == 200


async def test_if_match_star(client: httpx.AsyncClient) -> None:
    doc = await create(client, http_sub())
    assert (
        await client.put(f"/subscriptions/{doc['id']}", json=http_sub(), headers={"If-Match": "*"})
    ).status_code == 200
    assert (await client.delete("/subscriptions/none", headers={"If-Match": "*"})).status_code == 404


async def test_options_and_405(client: httpx.AsyncClient) -> None:
    """OPTIONS answers 200 with Allow; any other method is 405 with Allow (problem+json)."""
    r = await client.options("/subscriptions")
    assert r.status_code == 200
    assert r.headers["allow"] == "GET, HEAD, POST, OPTIONS"
    r = await client.options("/subscriptions/anything")
    assert r.status_code == 200
    assert r.headers["allow"] == "GET, HEAD, PUT, DELETE, OPTIONS"
    for method, path, allow in (
        ("PATCH", "/subscriptions", "GET, HEAD, POST, OPTIONS"),
        ("DELETE", "/subscriptions", "GET, HEAD, POST, OPTIONS"),
        ("POST", "/subscriptions/x", "GET, HEAD, PUT, DELETE, OPTIONS"),
        ("BREW", "/subscriptions/x", "GET, HEAD, PUT, DELETE, OPTIONS"),
    ):
        r = await client.request(method, path)
        assert r.status_code == 405, (method, path)
        assert r.headers["allow"] == allow
        assert r.headers["content-type"] == "application/problem+json"


async def test_query_filters(client: httpx.AsyncClient) -> None:
    """3.2.5 Query: filter by protocol, source, type (contained in types) and sink."""
    a = await create(client, http_sub(source="/s1", types=["t1", "t2"]))
    b = await create(client, {**VALID["NATS"], "source": "/s2", "types": ["t2"]})
    c = await create(client, {**VALID["MQTT5"], "source": "/s1"})

    async def ids(**params: str) -> list[str]:
        r = await client.get("/subscriptions", params=params)
        assert r.status_code == 200
        return [s["id"] for s in r.json()]

    assert await ids() == [a["id"], b["id"], c["id"]]
    assert await ids(protocol="NATS") == [b["id"]]
    assert await ids(source="/s1") == [a["id"], c["id"]]
    assert await ids(type="t2") == [a["id"], b["id"]]
    assert await ids(type="t2", source="/s1") == [a["id"]]
    assert await ids(sink=VALID["MQTT5"]["sink"]) == [c["id"]]
    assert await ids(protocol="KAFKA") == []


async def test_query_pagination_with_link_header(client: httpx.AsyncClient) -> None:
    """Pagination: limit + opaque cursor; Link rel=next keeps the filters; last page has no Link."""
    made = [(await create(client, http_sub(types=["p"])))["id"] for _ in range(5)]
    await create(client, http_sub(types=["other"]))
    seen: list[str] = []
    url: str | None = "/subscriptions?type=p&limit=2"
    pages = 0
    while url is not None:
        r = await client.get(url)
        assert r.status_code == 200
        seen += [s["id"] for s in r.json()]
        pages += 1
        link = r.headers.get("link")
        if link is None:
            url = None
        else:
            assert link.endswith('>; rel="next"')
            url = link[1 : link.index(">")]
            assert "type=p" in url
            assert "limit=2" in url
    assert seen == made
    assert pages == 3


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=abc", "limit"),
        ("cursor=garbage", "cursor"),
        ("protocol=", "protocol"),
        ("type=a&type=b", "type"),
        ("bogus=1", "bogus"),
    ],
)
async def test_query_parameter_errors(client: httpx.AsyncClient, query: str, parameter: str) -> None:
    r = await client.get(f"/subscriptions?{query}")
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"][0]["parameter"] == parameter


async def test_changes_reach_the_store_feed_before_the_answer(
    client: httpx.AsyncClient, app: Starlette
) -> None:
    """Each API write is on the store's change feed by the time the response arrives."""
    store = app.state.components[0].storage.subscriptions
    seen: list[SubscriptionChange] = []
    store.changes.subscribe(seen.append)
    doc = await create(client, http_sub())
    assert [c.kind for c in seen] == [ChangeKind.CREATED]
    await client.put(f"/subscriptions/{doc['id']}", json=http_sub(types=["x"]))
    assert seen[-1].kind is ChangeKind.UPDATED
    assert seen[-1].subscription.types == ("x",)
    await client.delete(f"/subscriptions/{doc['id']}")
    last = seen[-1]  # a new change, read afresh (the assertion above narrowed seen[-1].kind)
    assert last.kind is ChangeKind.DELETED


async def test_base_url_makes_location_and_link_absolute(tmp_path: Path) -> None:
    """With --base-url, Location and Link name the public URL of the broker."""
    app = create_app(Settings(db=tmp_path / "b.db", base_url="https://broker.example/api/"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://internal") as c:
            first = await c.post("/subscriptions", json=http_sub())
            assert (
                first.headers["location"] == f"https://broker.example/api/subscriptions/{first.json()['id']}"
            )
            await c.post("/subscriptions", json=http_sub())
            link = (await c.get("/subscriptions?limit=1")).headers["link"]
            assert link.startswith("<https://broker.example/api/subscriptions?limit=1&cursor=")


async def test_store_failure_is_503_problem(settings: Settings) -> None:
    """A failing store answers 503 problem+json (documented) naming the cause, never a 500 or a
    traceback."""
    connection, faults = faulty_connection()
    storage = SqliteStorage(Path(settings.db), connection_factory=connection)
    app = create_app(settings, build_components(settings, storage))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://broker.test") as client:
            faults.arm("database file is corrupt", sql="SELECT", thread="reader")
            r = await client.get("/subscriptions/x")
            assert r.status_code == 503
            assert r.headers["content-type"] == "application/problem+json"
            assert r.json()["type"] == "https://cebroker.dev/problems/store-unavailable"
            assert "database file is corrupt" in r.json()["detail"]
            assert int(r.headers["retry-after"]) >= 1


async def test_concurrent_conditional_replaces_have_one_winner(client: httpx.AsyncClient) -> None:
    """Ten PUTs with the same If-Match race: the store's revision check lets exactly one through."""
    import asyncio

    doc = await create(client, http_sub())
    sid = doc["id"]
    answers = await asyncio.gather(
        *(
            client.put(
                f"/subscriptions/{sid}", json=http_sub(types=[f"t{i}"]), headers={"If-Match": f'"{sid}-1"'}
            )
            for i in range(10)
        )
    )
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] + [412] * 9
    winner = next(r for r in answers if r.status_code == 200)
    assert (await client.get(f"/subscriptions/{sid}")).json()["types"] == winner.json()["types"]
