"""Validation of proposed subscriptions: every bad input is a 4xx problem+json naming the field
(RFC 9457 ``errors`` with JSON Pointers), every problem is reported at once, nothing is stored.

Rules come from the Subscriptions API spec: 3.2.1 (subscription object), 3.2.2 (protocol
settings per protocol), 3.2.3 (sink credentials), 3.2.4 (filters)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from api.bodies import VALID, create, http_sub
from cebroker.settings import Settings

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (case id, request body, pointer, fragment of the message)
    # 3.2.1 protocol: required, case-sensitive, one of six; hints for near misses
    ("protocol-missing", {"sink": "http://h/"}, "/protocol", "is required"),
    ("protocol-type", {"protocol": 1, "sink": "http://h/"}, "/protocol", "must be a string"),
    ("protocol-case", {"protocol": "http", "sink": "http://h/"}, "/protocol", "case-sensitive: use 'HTTP'"),
    ("protocol-https", {"protocol": "HTTPS", "sink": "https://h/"}, "/protocol", "use 'HTTP'"),
    ("protocol-mqtt", {"protocol": "MQTT", "sink": "mqtt://h"}, "/protocol", "'MQTT3' or 'MQTT5'"),
    ("protocol-unknown", {"protocol": "SMTP", "sink": "http://h/"}, "/protocol", "use one of HTTP, MQTT3"),
    # 3.2.1 sink: required absolute URI whose scheme fits the protocol
    ("sink-missing", {"protocol": "HTTP"}, "/sink", "is required"),
    ("sink-type", {"protocol": "HTTP", "sink": 5}, "/sink", "must be a string"),
    ("sink-relative", {"protocol": "HTTP", "sink": "/events"}, "/sink", "absolute URI"),
    ("sink-spaces", {"protocol": "HTTP", "sink": "http://h/a b"}, "/sink", "spaces"),
    (
        "sink-http-scheme",
        {"protocol": "HTTP", "sink": "mqtt://h/"},
        "/sink",
        "needs a sink scheme of http, https",
    ),
    (
        "sink-mqtt-scheme",
        {**VALID["MQTT3"], "sink": "http://h"},
        "/sink",
        "needs a sink scheme of mqtt, mqtts",
    ),
    ("sink-mqtt-websocket", {**VALID["MQTT5"], "sink": "https://h/mqtt"}, "/sink", "mqtt, mqtts, ws, wss"),
    ("sink-amqp-scheme", {**VALID["AMQP"], "sink": "https://h/q"}, "/sink", "amqp, amqps"),
    ("sink-kafka-scheme", {**VALID["KAFKA"], "sink": "http://k:9092"}, "/sink", "kafka"),
    ("sink-nats-scheme", {**VALID["NATS"], "sink": "amqp://n"}, "/sink", "nats, tls"),
    ("sink-port", {"protocol": "HTTP", "sink": "http://h:99999/"}, "/sink", "port"),
    ("sink-kafka-bootstrap", {**VALID["KAFKA"], "sink": "kafka://a:1,,b:2"}, "/sink", "host:port"),
    ("sink-kafka-port", {**VALID["KAFKA"], "sink": "kafka://a:1,b:70000"}, "/sink", "between 1 and 65535"),
    # 3.2.1 source, types, config
    ("source-empty", http_sub(source=""), "/source", "must not be empty"),
    ("source-type", http_sub(source=["/a"]), "/source", "must be a string"),
    ("source-spaces", http_sub(source="/a b"), "/source", "spaces"),
    ("types-type", http_sub(types="com.a"), "/types", "must be an array"),
    ("types-empty", http_sub(types=[]), "/types", "must not be empty"),
    ("types-item-empty", http_sub(types=["a", ""]), "/types/1", "must not be empty"),
    ("types-item-type", http_sub(types=[3]), "/types/0", "must be a string"),
    ("config-type", http_sub(config=[1]), "/config", "must be an object"),
    ("config-empty-key", http_sub(config={"": 1}), "/config/", "keys must not be empty"),
    # unknown top-level fields, filter/filters together
    ("unknown-field", http_sub(colour="red"), "/colour", "unknown field 'colour'"),
    ("pointer-escaping", http_sub(**{"a/b~c": 1}), "/a~1b~0c", "unknown field"),
    ("filter-and-filters", http_sub(filter={"exact": {"type": "a"}}, filters=[]), "/filter", "not both"),
    # 3.2.4 filters, checked by the filter engine, each named with its pointer
    ("filters-type", http_sub(filters={"exact": {"type": "a"}}), "/filters", "must be an array"),
    (
        "filter-dialect",
        http_sub(filters=[{"regex": "a.*"}]),
        "/filters/0/regex",
        "unsupported filter dialect",
    ),
    ("filter-empty-name", http_sub(filters=[{"exact": {"": "x"}}]), "/filters/0/exact/", "must not be empty"),
    ("filter-empty-value", http_sub(filters=[{"prefix": {"type": ""}}]), "/filters/0/prefix/type", "empty"),
    ("filter-all-empty", http_sub(filters=[{"all": []}]), "/filters/0/all", "at least one"),
    ("filter-any-empty", http_sub(filters=[{"any": []}]), "/filters/0/any", "at least one"),
    (
        "filter-nested",
        http_sub(filters=[{"not": {"all": [{"suffix": {}}]}}]),
        "/filters/0/not/all/0/suffix",
        "",
    ),
    ("filter-alias-pointer", http_sub(filter={"exact": {"type": ""}}), "/filter/exact/type", "empty"),
    ("filter-second", http_sub(filters=[{"exact": {"type": "a"}}, {"any": []}]), "/filters/1/any", ""),
    # 3.2.2.1 HTTP
    (
        "http-method",
        http_sub(protocolsettings={"method": "GET"}),
        "/protocolsettings/method",
        "'POST', 'PUT'",
    ),
    ("http-headers-type", http_sub(protocolsettings={"headers": []}), "/protocolsettings/headers", "object"),
    (
        "http-header-value",
        http_sub(protocolsettings={"headers": {"x-a": 1}}),
        "/protocolsettings/headers/x-a",
        "string",
    ),
    (
        "http-header-crlf",
        http_sub(protocolsettings={"headers": {"x-a": "v\r\nx: y"}}),
        "/protocolsettings/headers/x-a",
        "line breaks",
    ),
    (
        "http-header-control",
        http_sub(protocolsettings={"headers": {"x-esc": "v\x1b[2J"}}),
        "/protocolsettings/headers/x-esc",
        "control characters",
    ),
    (
        "http-header-name",
        http_sub(protocolsettings={"headers": {"bad name": "v"}}),
        "/protocolsettings/headers/bad name",
        "header name",
    ),
    (
        "http-header-ce",
        http_sub(protocolsettings={"headers": {"ce-id": "v"}}),
        "/protocolsettings/headers/ce-id",
        "set by the broker",
    ),
    (
        "http-unknown",
        http_sub(protocolsettings={"topicname": "t"}),
        "/protocolsettings/topicname",
        "unknown setting 'topicname' for HTTP; known settings:",
    ),
    # 3.2.2.2 MQTT
    (
        "mqtt-topic-missing",
        {**VALID["MQTT3"], "protocolsettings": {}},
        "/protocolsettings/topicname",
        "is required for protocol MQTT3",
    ),
    (
        "mqtt-topic-wildcard",
        {**VALID["MQTT5"], "protocolsettings": {"topicname": "a/#"}},
        "/protocolsettings/topicname",
        "wildcards",
    ),
    (
        "mqtt-qos-range",
        {**VALID["MQTT5"], "protocolsettings": {"topicname": "a", "qos": 3}},
        "/protocolsettings/qos",
        "between 0 and 2",
    ),
    (
        "mqtt-qos-bool",
        {**VALID["MQTT5"], "protocolsettings": {"topicname": "a", "qos": True}},
        "/protocolsettings/qos",
        "integer",
    ),
    (
        "mqtt-retain",
        {**VALID["MQTT3"], "protocolsettings": {"topicname": "a", "retain": "yes"}},
        "/protocolsettings/retain",
        "boolean",
    ),
    (
        "mqtt3-expiry",
        {**VALID["MQTT3"], "protocolsettings": {"topicname": "a", "expiry": 5}},
        "/protocolsettings/expiry",
        "MQTT 5 only",
    ),
    (
        "mqtt3-userprops",
        {**VALID["MQTT3"], "protocolsettings": {"topicname": "a", "userproperties": {}}},
        "/protocolsettings/userproperties",
        "MQTT 5 only",
    ),
    (
        "mqtt5-expiry",
        {**VALID["MQTT5"], "protocolsettings": {"topicname": "a", "expiry": -1}},
        "/protocolsettings/expiry",
        "between 0",
    ),
    (
        "mqtt5-userprops",
        {**VALID["MQTT5"], "protocolsettings": {"topicname": "a", "userproperties": {"k": 1}}},
        "/protocolsettings/userproperties/k",
        "string",
    ),
    # 3.2.2.3 AMQP
    (
        "amqp-settlement",
        {**VALID["AMQP"], "protocolsettings": {"sendersettlementmode": "first"}},
        "/protocolsettings/sendersettlementmode",
        "'settled', 'unsettled'",
    ),
    (
        "amqp-address-needed",
        {"protocol": "AMQP", "sink": "amqp://h:5672"},
        "/protocolsettings/address",
        "is required when the sink URI has no path",
    ),
    (
        "amqp-linkname",
        {**VALID["AMQP"], "protocolsettings": {"linkname": ""}},
        "/protocolsettings/linkname",
        "empty",
    ),
    (
        "amqp-linkproperties",
        {**VALID["AMQP"], "protocolsettings": {"linkproperties": {"a": {}}}},
        "/protocolsettings/linkproperties/a",
        "string",
    ),
    (
        "amqp-unknown",
        {**VALID["AMQP"], "protocolsettings": {"linkTitle": "x"}},
        "/protocolsettings/linkTitle",
        "unknown setting 'linkTitle' for AMQP; known settings: address, contentmode, linkname",
    ),
    (
        "amqp-two-spellings",
        {**VALID["AMQP"], "protocolsettings": {"linkname": "x", "linkName": "y"}},
        "/protocolsettings/linkName",
        "gives the setting 'linkname' a second time",
    ),
    (
        "amqp-camelcase-checked",
        {**VALID["AMQP"], "protocolsettings": {"linkName": ""}},
        "/protocolsettings/linkName",
        "empty",
    ),
    # contentmode and the Kafka key attribute: broker extensions registered by the protocol bridge
    (
        "mqtt3-binary",
        {**VALID["MQTT3"], "protocolsettings": {"topicname": "a", "contentmode": "binary"}},
        "/protocolsettings/contentmode",
        "must be 'structured'",
    ),
    (
        "nats-contentmode",
        {**VALID["NATS"], "protocolsettings": {"subject": "a", "contentmode": "batch"}},
        "/protocolsettings/contentmode",
        "'binary' or 'structured'",
    ),
    # 3.2.2.4 Kafka
    (
        "kafka-key-extractor",
        {**VALID["KAFKA"], "protocolsettings": {"topicname": "t", "partitionkeyextractor": "$.data.id"}},
        "/protocolsettings/partitionkeyextractor",
        "context attribute",
    ),
    (
        "kafka-topic-missing",
        {**VALID["KAFKA"], "protocolsettings": {}},
        "/protocolsettings/topicname",
        "is required for protocol KAFKA",
    ),
    (
        "kafka-topic-chars",
        {**VALID["KAFKA"], "protocolsettings": {"topicname": "a b"}},
        "/protocolsettings/topicname",
        "letters, digits",
    ),
    (
        "kafka-acks",
        {**VALID["KAFKA"], "protocolsettings": {"topicname": "t", "acks": "2"}},
        "/protocolsettings/acks",
        "'0', '1', 'all'",
    ),
    (
        "kafka-ackmode",
        {**VALID["KAFKA"], "protocolsettings": {"topicname": "t", "ackmode": 1}},
        "/protocolsettings/ackmode",
        "known settings: acks, clientid",
    ),
    (
        "kafka-clientid",
        {**VALID["KAFKA"], "protocolsettings": {"topicname": "t", "clientid": 7}},
        "/protocolsettings/clientid",
        "string",
    ),
    # 3.2.2.5 NATS
    (
        "nats-subject-missing",
        {**VALID["NATS"], "protocolsettings": {}},
        "/protocolsettings/subject",
        "is required for protocol NATS",
    ),
    (
        "nats-subject-wildcard",
        {**VALID["NATS"], "protocolsettings": {"subject": "a.>"}},
        "/protocolsettings/subject",
        "wildcards",
    ),
    (
        "nats-subject-empty-token",
        {**VALID["NATS"], "protocolsettings": {"subject": "a..b"}},
        "/protocolsettings/subject",
        "non-empty tokens",
    ),
    ("settings-type", http_sub(protocolsettings="POST"), "/protocolsettings", "must be an object"),
    # 3.2.3 sink credentials
    ("cred-type", http_sub(sinkcredential="token"), "/sinkcredential", "must be an object"),
    (
        "cred-kind-missing",
        http_sub(sinkcredential={"secret": "x"}),
        "/sinkcredential/credentialtype",
        "is required",
    ),
    (
        "cred-kind-case",
        http_sub(sinkcredential={"credentialtype": "plain"}),
        "/sinkcredential/credentialtype",
        "use 'PLAIN'",
    ),
    (
        "cred-kind-unknown",
        http_sub(sinkcredential={"credentialtype": "KERBEROS"}),
        "/sinkcredential/credentialtype",
        "PLAIN, ACCESSTOKEN",
    ),
    (
        "cred-plain-secret",
        http_sub(sinkcredential={"credentialtype": "PLAIN", "identifier": "u"}),
        "/sinkcredential/secret",
        "is required for credentialtype PLAIN",
    ),
    (
        "cred-plain-identifier",
        http_sub(sinkcredential={"credentialtype": "PLAIN", "secret": "s"}),
        "/sinkcredential/identifier",
        "is required",
    ),
    (
        "cred-alias-both",
        http_sub(
            sinkcredential={"credentialtype": "PLAIN", "secret": "s", "identifier": "a", "identity": "b"}
        ),
        "/sinkcredential/identity",
        "not both",
    ),
    (
        "cred-access-expiry",
        http_sub(
            sinkcredential={
                "credentialtype": "ACCESSTOKEN",
                "accesstoken": "t",
                "accesstokentype": "bearer",
                "accesstokenexpiresutc": "tomorrow",
            }
        ),
        "/sinkcredential/accesstokenexpiresutc",
        "RFC 3339",
    ),
    (
        "cred-access-type-missing",
        http_sub(
            sinkcredential={
                "credentialtype": "ACCESSTOKEN",
                "accesstoken": "t",
                "accesstokenexpiresutc": "2030-01-01T00:00:00Z",
            }
        ),
        "/sinkcredential/accesstokentype",
        "is required",
    ),
    (
        "cred-refresh-url",
        http_sub(
            sinkcredential={
                "credentialtype": "REFRESHTOKEN",
                "accesstoken": "t",
                "accesstokentype": "bearer",
                "accesstokenexpiresutc": "2030-01-01T00:00:00+01:00",
                "refreshtoken": "r",
                "refreshtokenurl": "ftp://x/",
            }
        ),
        "/sinkcredential/refreshtokenurl",
        "scheme",
    ),
    (
        "cred-unknown-field",
        http_sub(
            sinkcredential={"credentialtype": "PLAIN", "identifier": "u", "secret": "s", "password": "p"}
        ),
        "/sinkcredential/password",
        "unknown field",
    ),
    (
        "cred-foreign-field",
        http_sub(
            sinkcredential={"credentialtype": "PLAIN", "identifier": "u", "secret": "s", "refreshtoken": "r"}
        ),
        "/sinkcredential/refreshtoken",
        "for credentialtype PLAIN",
    ),
]


@pytest.mark.parametrize(("body", "pointer", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_rule(client: httpx.AsyncClient, body: dict[str, Any], pointer: str, fragment: str) -> None:
    """Each rule: 400 problem+json with an ``errors`` entry at the field's pointer; nothing stored."""
    r = await client.post("/subscriptions", json=body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["type"] == "https://cebroker.dev/problems/invalid"
    assert problem["status"] == 400
    assert problem["title"]
    assert problem["detail"]
    matching = [e for e in problem["errors"] if e["pointer"] == pointer]
    assert matching, problem["errors"]
    assert any(fragment in e["detail"] for e in matching), matching
    assert (await client.get("/subscriptions")).json() == []


async def test_setting_names_match_in_any_case(client: httpx.AsyncClient) -> None:
    """docs/protocols.md: setting names match case-insensitively, so the upstream OpenAPI's
    ``linkName`` and ``linkProperties`` work; the realized subscription spells them as declared."""
    settings = {"linkName": "l", "LinkProperties": {"a": "b"}, "SenderSettlementMode": "settled"}
    doc = await create(client, {**VALID["AMQP"], "protocolsettings": settings})
    realized = doc["protocolsettings"]
    assert (realized["linkname"], realized["linkproperties"]) == ("l", {"a": "b"})
    assert realized["sendersettlementmode"] == "settled"
    assert not {"linkName", "LinkProperties", "SenderSettlementMode"} & realized.keys()
    kafka = await create(client, {**VALID["KAFKA"], "protocolsettings": {"TopicName": "t", "ACKS": "1"}})
    assert (kafka["protocolsettings"]["topicname"], kafka["protocolsettings"]["acks"]) == ("t", "1")


async def test_same_rules_apply_to_replace(client: httpx.AsyncClient) -> None:
    """Update (3.2.5) validates like create; the stored subscription stays as it was."""
    doc = await create(client, http_sub(types=["keep"]))
    r = await client.put(f"/subscriptions/{doc['id']}", json=http_sub(types=[]))
    assert r.status_code == 400
    assert r.json()["errors"][0]["pointer"] == "/types"
    assert (await client.get(f"/subscriptions/{doc['id']}")).json()["types"] == ["keep"]


async def test_every_problem_is_reported_at_once(client: httpx.AsyncClient) -> None:
    body = {
        "protocol": "MQTT3",
        "sink": "http://wrong/",
        "protocolsettings": {"qos": 9, "expiry": 1},
        "types": [""],
        "filters": [{"exact": {"": "a"}}, {"all": []}],
        "extra": True,
    }
    r = await client.post("/subscriptions", json=body)
    assert r.status_code == 400
    pointers = sorted(e["pointer"] for e in r.json()["errors"])
    assert pointers == sorted(
        [
            "/extra",
            "/sink",
            "/protocolsettings/qos",
            "/protocolsettings/expiry",
            "/protocolsettings/topicname",
            "/types/0",
            "/filters/0/exact/",
            "/filters/1/all",
        ]
    )
    assert "8 problems" in r.json()["detail"]


async def test_secret_values_are_not_echoed_in_errors(client: httpx.AsyncClient) -> None:
    """3.2.3: secrets are write-only; an error about a credential never quotes its value."""
    body = http_sub(
        protocol="HTTPS",
        sinkcredential={
            "credentialtype": "REFRESHTOKEN",
            "accesstoken": "TOPSECRET-A",
            "accesstokentype": "",
            "accesstokenexpiresutc": "TOPSECRET-E",
            "refreshtoken": ["TOPSECRET-R"],
            "refreshtokenendpoint": "TOPSECRET-U",
        },
    )
    r = await client.post("/subscriptions", json=body)
    assert r.status_code == 400
    assert len(r.json()["errors"]) >= 4
    assert "TOPSECRET" not in r.text


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[1, 2]",
        b'"text"',
        b"null",
        b"",
        b'{"a": 1, "a": 2}',
        b'{"x": NaN}',
        b"\xff\xfe{}",
        b'{"protocol": "HTTP", "sink": "http://h/", "config": {"a": "\\ud800"}}',
        b'{"protocol": "HTTP", "sink": "http://h/", "config": {"a": 1e400}}',
    ],
    ids=[
        "truncated",
        "array",
        "string",
        "null",
        "empty",
        "duplicate",
        "nan",
        "not-utf8",
        "surrogate",
        "overflow",
    ],
)
async def test_malformed_or_non_object_body_is_400(
    client: httpx.AsyncClient, settings: Settings, body: bytes
) -> None:
    r = await client.post("/subscriptions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/problem+json"
    # A string that is not Unicode text and a number out of range are named by their field; the
    # others are the whole body's.
    named = b"\\ud800" in body or b"1e400" in body
    assert r.json()["errors"][0]["pointer"] == ("/config/a" if named else "")


@pytest.mark.parametrize(("levels", "limit"), [(100, "filter"), (300, "nesting")])
async def test_nested_filters_within_limit_are_checked(
    client: httpx.AsyncClient, levels: int, limit: str
) -> None:
    """A filter nested within the JSON nesting limit is refused by the filter engine (32
    levels), one nested beyond it by the JSON reader (128 levels); both with a pointer."""
    body = (
        b'{"protocol": "HTTP", "sink": "http://h/", "filters": ['
        + b'{"not": ' * levels
        + b"{}"
        + b"}" * levels
        + b"]}"
    )
    r = await client.post("/subscriptions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    error = r.json()["errors"][0]
    assert error["pointer"].startswith("/filters/0/not/not")
    assert set(error["pointer"].removeprefix("/filters/0").split("/")) == {"", "not"}
    assert ("input limit: nesting" in error["detail"]) is (limit == "nesting")


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/xml", "application/json; charset=latin-1", "multipart/form-data"],
)
async def test_wrong_content_type_is_415(client: httpx.AsyncClient, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    r = await client.post(
        "/subscriptions", content=b'{"protocol": "HTTP", "sink": "http://h/"}', headers=headers
    )
    assert r.status_code == 415
    assert r.headers["content-type"] == "application/problem+json"
    assert (await client.get("/subscriptions")).json() == []


async def test_body_over_limit_is_413(client: httpx.AsyncClient, settings: Settings) -> None:
    """Body limit (configurable, 64 KiB by default; 4 KiB in these tests): 413, whether the
    length is declared or the body is streamed."""
    big = http_sub(config={"pad": "x" * settings.max_subscription_body})
    r = await client.post("/subscriptions", json=big)
    assert r.status_code == 413
    assert r.headers["content-type"] == "application/problem+json"

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"protocol": "HTTP", "sink": "http://h/", "config": {"pad": "'
        for _ in range(10):
            yield b"y" * 1024
        yield b'"}}'

    r = await client.post("/subscriptions", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert (await client.get("/subscriptions")).json() == []
