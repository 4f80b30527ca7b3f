"""Every malformed request gets a 4xx problem+json naming what is wrong, never a 500 (core spec
errors; HTTP binding headers). Random requests are drawn from a fixed seed, so a failure repeats."""

from __future__ import annotations

import json
import random
from typing import Any

from starlette.testclient import TestClient

HTTP = "https://github.com/xregistry/spec/blob/main/core/http.md#"
PATHS = [
    "/",
    "/messagegroups",
    "/messagegroups/g",
    "/messagegroups/g/messages",
    "/messagegroups/g/messages/m",
    "/messagegroups/g/messages/m/meta",
    "/messagegroups/g/messages/m/versions",
    "/messagegroups/g/messages/m/versions/1",
    "/schemagroups/s/schemas/x",
    "/schemagroups/s/schemas/x$details",
    "/schemagroups/s/schemas/x/versions/1$details",
    "/schemagroups/s/schemas/x/meta",
    "/endpoints/e",
    "/endpoints/e/messages/m",
]
VALUES: list[Any] = [
    None,
    1,
    -1,
    1.5,
    "s",
    "",
    [],
    [1],
    {},
    {"a": 1},
    {"a": None},
    True,
    "x" * 300,
    {"bad id": {}},
]
KEYS = [
    "epoch",
    "versions",
    "meta",
    "messages",
    "schemas",
    "labels",
    "envelopemetadata",
    "envelope",
    "dataschema",
    "dataschemauri",
    "basemessage",
    "defaultversionid",
    "defaultversionsticky",
    "versionid",
    "messageid",
    "schema",
    "schemabase64",
    "usage",
    "createdat",
    "name",
    "protocoloptions",
    "messagegroups",
    "schemagroups",
    "Bad-Key",
]
FLAGS = [
    "",
    "?inline=*",
    "?doc",
    "?filter=epoch>1",
    "?epoch=1",
    "?setdefaultversionid=1",
    "?ignore",
    "?collections",
]


def test_random_json_requests_never_fail_the_server(client: TestClient) -> None:
    """600 random method/path/flag/body combinations: each answer is below 500, errors are problems."""
    rng = random.Random(20261121)
    for _ in range(600):
        path = rng.choice(PATHS) + rng.choice(FLAGS)
        method = rng.choice(["PUT", "PATCH", "POST", "DELETE", "GET"])
        body: Any = {rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(0, 3))}
        if rng.random() < 0.1:
            body = rng.choice(VALUES)
        elif rng.random() < 0.3:
            body = {rng.choice(["g", "m", "1", "bad id"]): body}
        r = client.request(method, path, content=json.dumps(body))
        assert r.status_code < 500, (method, path, body, r.text)
        if r.status_code >= 400:
            assert r.headers["content-type"] == "application/problem+json", (method, path, body)
            assert r.json()["type"].startswith("https://github.com/xregistry/spec/"), r.text


def test_random_document_headers_never_fail_the_server(client: TestClient) -> None:
    """Raw document writes with odd xRegistry-* headers and bodies are refused cleanly."""
    rng = random.Random(7)
    names = [
        "epoch",
        "labels",
        "labels-a",
        "format",
        "versionid",
        "schemaid",
        "defaultversionsticky",
        "",
        "a.b",
    ]
    values = ["abc", "1", "-1", "null", "true", "%ZZ", "2020-01-01T00:00:00Z", "x y", "bad id"]
    for _ in range(300):
        headers = {f"xRegistry-{rng.choice(names)}": rng.choice(values) for _ in range(rng.randint(0, 3))}
        headers["content-type"] = rng.choice(["application/json", "text/plain", "application/octet-stream"])
        path = rng.choice(["/schemagroups/s/schemas/x", "/schemagroups/s/schemas/x/versions/v"])
        method = rng.choice(["PUT", "POST", "GET", "DELETE"])
        body = rng.choice([b"", b"{}", b"\xff\xfe", b"not json"])
        r = client.request(method, path, content=body, headers=headers)
        assert r.status_code < 500, (method, path, headers, r.text)


def test_value_and_map_header_is_header_error(client: TestClient) -> None:
    """One attribute as a value and as a map (xRegistry-labels and xRegistry-labels-a) is header_error."""
    r = client.put(
        "/schemagroups/s/schemas/x",
        content=b"{}",
        headers={"xRegistry-labels": "v", "xRegistry-labels-a": "b", "content-type": "application/json"},
    )
    assert r.status_code == 400
    assert r.json()["type"] == HTTP + "header_error"
