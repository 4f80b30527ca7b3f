"""Property: every valid subscription is accepted and realized exactly as sent, plus the
protocol's defaults, minus the secrets; retrieving it gives the same document (spec 3.2.5.1
"returns a subscription object that also contains all OPTIONAL properties for which default
values have been applied")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from ceprotocols.jsontext import INT_MAX, INT_MIN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cebroker.app import create_app
from cebroker.settings import Settings

# An attribute name: ``data`` and ``data_base64`` name the payload and are refused as filter
# attributes (cefilters.dialects.attributes), so a valid subscription never holds them.
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8).filter(
    lambda name: name not in ("data", "data_base64")
)
TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=12
)
TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=10)
HOST = st.sampled_from(["127.0.0.1", "broker.example", "[::1]"])
PORT = st.integers(1, 65535)
INT64 = st.integers(INT_MIN, INT_MAX)  # what the JSON reader accepts
CONTENT_MODE = st.sampled_from(["binary", "structured"])

SETTINGS: dict[str, tuple[st.SearchStrategy[str], st.SearchStrategy[dict[str, Any]], dict[str, Any]]] = {
    "HTTP": (
        st.builds(
            lambda s, h, p, t: f"{s}://{h}:{p}/{t}", st.sampled_from(["http", "https"]), HOST, PORT, TOKEN
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "method": st.sampled_from(["POST", "PUT", "PATCH"]),
                "headers": st.dictionaries(st.from_regex(r"x-[a-z]{1,6}", fullmatch=True), TOKEN, max_size=3),
                "contentmode": CONTENT_MODE,
            },
        ),
        {"method": "POST", "contentmode": "binary"},
    ),
    "MQTT5": (
        st.builds(lambda s, h, p: f"{s}://{h}:{p}", st.sampled_from(["mqtt", "mqtts"]), HOST, PORT),
        st.fixed_dictionaries(
            {"topicname": st.builds("/".join, st.lists(TOKEN, min_size=1, max_size=3))},
            optional={
                "qos": st.integers(0, 2),
                "retain": st.booleans(),
                "expiry": st.integers(0, 2**32 - 1),
                "userproperties": st.dictionaries(TOKEN, TEXT, max_size=3),
                "contentmode": CONTENT_MODE,
            },
        ),
        {"qos": 1, "retain": False, "contentmode": "binary"},
    ),
    "AMQP": (
        st.builds(lambda s, h, t: f"{s}://{h}/queue/{t}", st.sampled_from(["amqp", "amqps"]), HOST, TOKEN),
        st.fixed_dictionaries(
            {},
            optional={
                "linkname": TOKEN,
                "sendersettlementmode": st.sampled_from(["settled", "unsettled"]),
                "linkproperties": st.dictionaries(TOKEN, TEXT, max_size=2),
                "contentmode": CONTENT_MODE,
            },
        ),
        {"sendersettlementmode": "unsettled", "contentmode": "binary"},
    ),
    "KAFKA": (
        st.builds(
            lambda hosts: "kafka://" + ",".join(hosts),
            st.lists(st.builds("{}:{}".format, HOST, PORT), min_size=1, max_size=3),
        ),
        st.fixed_dictionaries(
            {"topicname": st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}", fullmatch=True)},
            optional={
                "acks": st.sampled_from(["0", "1", "all", -1]),
                "clientid": TOKEN,
                "contentmode": CONTENT_MODE,
            },
        ),
        {"acks": "all", "contentmode": "binary"},
    ),
    "NATS": (
        st.builds(lambda s, h, p: f"{s}://{h}:{p}", st.sampled_from(["nats", "tls"]), HOST, PORT),
        st.fixed_dictionaries(
            {"subject": st.builds(".".join, st.lists(TOKEN, min_size=1, max_size=3))},
            optional={"contentmode": CONTENT_MODE},
        ),
        {"contentmode": "binary"},
    ),
}

LEAF = st.builds(lambda d, a, v: {d: {a: v}}, st.sampled_from(["exact", "prefix", "suffix"]), NAME, TEXT)
FILTER = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.builds(lambda fs: {"all": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda fs: {"any": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda f: {"not": f}, inner),
    ),
    max_leaves=5,
)
_ACCESS = {
    "accesstoken": TEXT,
    "accesstokenexpiresutc": st.just("2031-02-03T04:05:06Z"),
    "accesstokentype": st.just("bearer"),
}
# Both spellings of the aliased fields: the realized subscription keeps the one sent.
CREDENTIAL = st.one_of(
    *(
        st.fixed_dictionaries({"credentialtype": st.just("PLAIN"), name: TEXT, "secret": TEXT})
        for name in ("identifier", "identity")
    ),
    st.fixed_dictionaries({"credentialtype": st.just("ACCESSTOKEN"), **_ACCESS}),
    *(
        st.fixed_dictionaries(
            {
                "credentialtype": st.just("REFRESHTOKEN"),
                **_ACCESS,
                "refreshtoken": TEXT,
                name: st.just("https://auth.example/token"),
            }
        )
        for name in ("refreshtokenendpoint", "refreshtokenurl")
    ),
)


@st.composite
def subscriptions(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request body, the realized subscription expected back, without its id)."""
    protocol = draw(st.sampled_from(sorted(SETTINGS)))
    sink_strategy, settings_strategy, defaults = SETTINGS[protocol]
    body: dict[str, Any] = {"protocol": protocol, "sink": draw(sink_strategy)}
    settings_given = draw(settings_strategy)
    if bool(settings_given) or draw(st.booleans()):
        body["protocolsettings"] = settings_given
    optional = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "source": st.builds("/{}/{}".format, TOKEN, TOKEN),
                "types": st.lists(TEXT, min_size=1, max_size=3),
                # Valid JSON numbers only: an integer outside 64 bits is refused by the input limits
                # (docs/limits.md), so a body holding one is no valid subscription.
                "config": st.dictionaries(TOKEN, st.one_of(INT64, TEXT, st.booleans()), max_size=3),
                "filters": st.lists(FILTER, max_size=2),
                "sinkcredential": CREDENTIAL,
            },
        )
    )
    body.update(optional)
    expected: dict[str, Any] = {
        "config": {},
        "filters": [],
        **{k: v for k, v in body.items()},
        "protocolsettings": {**defaults, **settings_given},
    }
    if "sinkcredential" in body:
        expected["sinkcredential"] = {
            k: v
            for k, v in body["sinkcredential"].items()
            if k not in ("secret", "accesstoken", "refreshtoken")
        }
    return body, expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=subscriptions())
def test_valid_subscriptions_round_trip(tmp_path: Path, case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    body, expected = case

    async def run() -> None:
        app = create_app(Settings(db=tmp_path / "prop.db"))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                r = await client.post("/subscriptions", json=body)
                assert r.status_code == 201, r.text
                created = r.json()
                assert {k: v for k, v in created.items() if k != "id"} == expected
                assert (await client.get(f"/subscriptions/{created['id']}")).json() == created

    asyncio.run(run())
