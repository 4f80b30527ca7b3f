"""Unit tests of the API's building blocks: JSON parsing, If-Match, query parameters, realize()."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.datastructures import QueryParams

from cebroker.api.admission import build_rules, realize
from cebroker.api.query import next_link, parse_query
from cebroker.app import admission_rules
from cebroker.errors import PreconditionFailed, ValidationError
from cebroker.storage import SubscriptionQuery
from cebroker.subscription_rules import ConfigKeyRule, SettingRule, SubscriptionRules
from cebroker.web.body import parse_json
from cebroker.web.conditional import check_if_match

#: The rules the broker validates with (its own and every part's declarations).
RULES = admission_rules()


def test_parse_json_accepts_objects_and_rejects_the_rest() -> None:
    assert parse_json(b' {"a": [1, 2.5, null, "\\u00e9\\ud83d\\ude00"]} ') == {
        "a": [1, 2.5, None, "\u00e9\U0001f600"]
    }


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000,  # nested beyond the recursion limit
        b'{"a": Infinity}',
        b'{"a": 1e400}',  # parses as inf: no JSON answer could carry it
        b'{"a": "\\ud800"}',  # a lone surrogate: not storable, not encodable
        b'{"a": ' + b"9" * 5000 + b"}",  # beyond Python's int conversion limit
        b'{"a": 1, "a": 1}',
        b"{,}",
        b"\x80",
    ],
    ids=["deep", "infinity", "overflow", "surrogate", "huge-int", "duplicate", "syntax", "not-utf8"],
)
def test_parse_json_rejects(raw: bytes) -> None:
    with pytest.raises(ValidationError):
        parse_json(raw)


def test_realize_survives_pathological_nesting() -> None:
    """A filter nested beyond Python's recursion limit is a 400 problem, not a crash."""
    deep: dict[str, Any] = {"exact": {"type": "a"}}
    for _ in range(5000):
        deep = {"not": deep}
    with pytest.raises(ValidationError) as info:
        realize(
            {"protocol": "HTTP", "sink": "http://h/", "filters": [deep]}, rules=RULES, subscription_id="x"
        )
    assert info.value.problems[0].pointer.startswith("/filters/0")


def test_realize_ignores_body_id_on_create() -> None:
    """3.2.5.1: the server assigns the id; defaults are applied (contentmode comes from the
    protocol bridge's declared rules)."""
    sub = realize(
        {
            "id": "client-chosen",
            "protocol": "NATS",
            "sink": "tls://n:4222",
            "protocolsettings": {"subject": "a"},
        },
        rules=RULES,
        subscription_id="srv",
    )
    assert sub.id == "srv"
    assert sub.protocolsettings == {"subject": "a", "contentmode": "binary"}


@pytest.mark.parametrize(
    ("header", "pinned"),
    [(None, False), ("*", False), (' "s-1" ', True), ('"a", "s-1"', True), ('W/"a", "s-1"', True)],
)
def test_if_match_accepts(header: str | None, pinned: bool) -> None:
    assert check_if_match(header, '"s-1"') is pinned


@pytest.mark.parametrize("header", ['"s-2"', 'W/"s-1"', '"a","b"'])
def test_if_match_refuses(header: str) -> None:
    with pytest.raises(PreconditionFailed):
        check_if_match(header, '"s-1"')


@pytest.mark.parametrize("header", ["s-1", '"s-1', '"a" "b"', ""])
def test_if_match_malformed(header: str) -> None:
    with pytest.raises(ValidationError):
        check_if_match(header, '"s-1"')


def test_parse_query_and_next_link_round_trip() -> None:
    query = parse_query(QueryParams("protocol=HTTP&type=com.a b&limit=5"))
    assert query == SubscriptionQuery(protocol="HTTP", type="com.a b", limit=5)
    link = next_link("", query, "CUR")
    assert link == '</subscriptions?protocol=HTTP&type=com.a+b&limit=5&cursor=CUR>; rel="next"'
    url = link[1 : link.index(">")]
    again = parse_query(QueryParams(url.split("?", 1)[1]))
    assert again == SubscriptionQuery(protocol="HTTP", type="com.a b", limit=5, cursor="CUR")


def test_a_failing_declared_check_is_a_problem_not_a_crash() -> None:
    """Checks declared by other parts are guarded: a bug in one names the field (400)."""

    def broken(value: Any) -> list[str]:
        raise TypeError("bug")

    rules = build_rules(SubscriptionRules(config_keys=(ConfigKeyRule(name="broken", check=broken),)))
    with pytest.raises(ValidationError) as info:
        realize(
            {"protocol": "HTTP", "sink": "http://h/", "config": {"broken": 1}},
            rules=rules,
            subscription_id="x",
        )
    assert [p.pointer for p in info.value.problems] == ["/config/broken"]


def test_sender_refusals_are_reported_with_a_pointer(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the sender library would refuse is refused at create time, with a pointer; a sink
    refusal does not echo the URL (user information is refused before, but the URL is the
    subscriber's text all the same)."""
    from ceprotocols import SettingsError

    from cebroker.api.admission import delivery

    def refuse(field: str) -> Any:
        def check(protocol: str, sink: str, settings: Any) -> None:
            raise SettingsError(field, f"{sink!r} refused")

        return check

    body = {"protocol": "NATS", "sink": "nats://n:4222", "protocolsettings": {"subject": "a"}}
    monkeypatch.setattr(delivery, "check_destination", refuse("protocolsettings.subject"))
    with pytest.raises(ValidationError) as info:
        realize(body, rules=RULES, subscription_id="x")
    assert info.value.problems[0].pointer == "/protocolsettings/subject"
    monkeypatch.setattr(delivery, "check_destination", refuse("sink"))
    with pytest.raises(ValidationError) as info:
        realize(body, rules=RULES, subscription_id="x")
    assert info.value.problems[0].pointer == "/sink"
    assert "nats://n:4222" not in info.value.problems[0].message


def test_rules_are_built_from_declarations_not_registered_globally() -> None:
    """Each build starts from the API's own tables: what one build adds, another does not see,
    so no result depends on which part was imported or built first."""
    bare = build_rules()
    assert "contentmode" not in bare.protocols["HTTP"].settings
    assert "contentmode" in RULES.protocols["HTTP"].settings
    assert "contentmode" not in build_rules().protocols["HTTP"].settings
    body = {"protocol": "HTTP", "sink": "http://h/", "protocolsettings": {"contentmode": "binary"}}
    with pytest.raises(ValidationError) as info:
        realize(body, rules=bare, subscription_id="x")
    assert [p.pointer for p in info.value.problems] == ["/protocolsettings/contentmode"]
    assert realize(body, rules=RULES, subscription_id="x").protocolsettings["contentmode"] == "binary"


def test_a_declared_setting_brings_its_check_default_and_schema() -> None:
    def even(value: Any) -> list[str]:
        return [] if isinstance(value, int) and value % 2 == 0 else ["must be an even number"]

    rule = SettingRule(protocol="NATS", name="lanes", check=even, schema={"type": "integer"}, default=2)
    rules = build_rules(SubscriptionRules(settings=(rule,)))
    assert rules.protocols["NATS"].schemas["lanes"] == {"type": "integer"}
    body = {"protocol": "NATS", "sink": "nats://n:4222", "protocolsettings": {"subject": "a"}}
    assert realize(body, rules=rules, subscription_id="x").protocolsettings["lanes"] == 2
    body["protocolsettings"] = {"subject": "a", "lanes": 3}
    with pytest.raises(ValidationError) as info:
        realize(body, rules=rules, subscription_id="x")
    assert [(p.pointer, p.message) for p in info.value.problems] == [
        ("/protocolsettings/lanes", "must be an even number")
    ]


def test_conflicting_declarations_are_refused_when_the_broker_is_built() -> None:
    def fine(value: Any) -> list[str]:
        return []

    twice = SettingRule(protocol="HTTP", name="x", check=fine, schema={})
    with pytest.raises(ValueError, match="declared twice"):
        build_rules(SubscriptionRules(settings=(twice,)), SubscriptionRules(settings=(twice,)))
    key = ConfigKeyRule(name="k", check=fine)
    with pytest.raises(ValueError, match="declared twice"):
        build_rules(SubscriptionRules(config_keys=(key, key)))
    with pytest.raises(ValueError, match="unknown protocol"):
        build_rules(
            SubscriptionRules(settings=(SettingRule(protocol="SMTP", name="x", check=fine, schema={}),))
        )
