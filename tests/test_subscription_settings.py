"""A subscription's ``config`` as typed :class:`DeliverySettings`: parsed once, when the
subscription is built, with the defaults in one place and the wire form left as it was given."""

from __future__ import annotations

import ast
import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cebroker.api.admission import realize
from cebroker.api.openapi_schemas import SCHEMAS
from cebroker.app import admission_rules
from cebroker.errors import ValidationError
from cebroker.subscription import Subscription, subscription_from_record
from cebroker.subscription_settings.delivery import (
    DEFAULTS,
    DeliverySettings,
    parse_delivery_settings,
    stored_delivery_settings,
)
from cebroker.subscription_settings.protocols import (
    HttpSettings,
    PullSettings,
    default_of,
    stored_protocol_settings,
)


def _problems(config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        parse_delivery_settings(config)
    return {problem.pointer: problem.message for problem in info.value.problems}


def test_an_empty_config_is_the_dataclass_defaults() -> None:
    settings = parse_delivery_settings({})
    assert settings == DeliverySettings() == DEFAULTS
    assert (settings.concurrency, settings.timeout, settings.maxattempts) == (8, 10.0, 0)
    assert (settings.ordering, settings.startfrom, settings.reply, settings.ratelimit) == (
        False,
        None,
        False,
        None,
    )


def test_every_member_is_typed() -> None:
    settings = parse_delivery_settings(
        {
            "maxattempts": "5",
            "backoff": "Linear",
            "initialdelay": 2,
            "maxdelay": "60",
            "ttl": 3600,
            "retryaftermax": "30",
            "timeout": "2.5",
            "concurrency": 3,
            "ratelimit": "7.5",
            "deadlettersink": "https://dead.example/letters",
            "probemaxdelay": 4,
            "ordering": "PartitionKey",
            "maxbatchsize": "50",
            "maxbatchbytes": 2048,
            "maxbatchdelay": "0",
            "startfrom": "2030-01-02T03:04:05Z",
            "reply": "PUBLISH",
            "transform": {"cel": "event"},  # read by the transformations, not here
            "custom": "kept in config, not read",
        }
    )
    assert settings == DeliverySettings(
        maxattempts=5,
        backoff="linear",
        initialdelay=2.0,
        maxdelay=60.0,
        ttl=3600.0,
        retryaftermax=30.0,
        timeout=2.5,
        concurrency=3,
        ratelimit=7.5,
        deadlettersink="https://dead.example/letters",
        probemaxdelay=4.0,
        ordering=True,
        maxbatchsize=50,
        maxbatchbytes=2048,
        maxbatchdelay=0.0,
        startfrom=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp(),
        reply=True,
    )
    assert isinstance(settings.concurrency, int)
    assert isinstance(settings.timeout, float)


@pytest.mark.parametrize(
    ("given", "expected"),
    [("now", None), ("NOW", None), ("earliest", 0.0), ("Earliest", 0.0), ("1970-01-01T00:01:00Z", 60.0)],
)
def test_startfrom_is_epoch_seconds_or_none_for_now(given: str, expected: float | None) -> None:
    assert parse_delivery_settings({"startfrom": given}).startfrom == expected


def test_ordering_none_and_reply_off_are_the_defaults_spelled_out() -> None:
    settings = parse_delivery_settings({"ordering": "none", "reply": "off"})
    assert (settings.ordering, settings.reply) == (False, False)


def test_every_bad_member_is_named_with_its_pointer_and_message() -> None:
    assert _problems(
        {
            "ttl": "-1",
            "concurrency": 257,
            "maxattempts": "1.5",
            "timeout": True,
            "maxbatchsize": 10_001,
            "maxbatchdelay": 61,
            "backoff": "random",
            "ordering": 1,
            "startfrom": "yesterday",
            "deadlettersink": "ftp://dead.example",
            "reply": "yes",
        }
    ) == {
        "/config/ttl": "must be positive",
        "/config/concurrency": "must be at most 256",
        "/config/maxattempts": "must be a whole number",
        "/config/timeout": "must be a number",
        "/config/maxbatchsize": "must be at most 10000",
        "/config/maxbatchdelay": "must be at most 60 seconds",
        "/config/backoff": "must be 'exponential' or 'linear'",
        "/config/ordering": "must be 'partitionkey' or 'none'",
        "/config/startfrom": "must be 'now', 'earliest' or an RFC 3339 timestamp",
        "/config/deadlettersink": "must be an http(s) URL",
        "/config/reply": "must be 'publish' or 'off'",
    }
    assert _problems({"deadlettersink": "https://user:pw@dead.example/"})[
        "/config/deadlettersink"
    ].startswith("must not carry user information")
    assert _problems({"startfrom": 0}) == {
        "/config/startfrom": "must be 'now', 'earliest' or an RFC 3339 timestamp"
    }


def test_a_subscription_holds_its_config_typed_and_its_wire_form_unchanged() -> None:
    config = {"concurrency": "3", "ordering": "partitionkey", "startfrom": "earliest", "custom": "x"}
    subscription = Subscription(id="s1", protocol="HTTP", sink="http://sink.example/", config=config)
    assert subscription.delivery == parse_delivery_settings(config)
    assert subscription.delivery.concurrency == 3
    assert subscription.delivery.ordering
    # The wire form is what was given, to the byte: the typed value is derived from it.
    assert subscription.to_json()["config"] == config
    again = subscription_from_record(subscription.to_record(), revision=2)
    assert again.to_record()["config"] == config
    assert again.delivery == subscription.delivery
    # A new revision of the config is parsed again; the typed value never takes part in equality.
    replaced = dataclasses.replace(subscription, config={"concurrency": 5})
    assert replaced.delivery.concurrency == 5
    assert replaced.delivery.startfrom is None
    same = Subscription(id="s1", protocol="HTTP", sink="http://sink.example/", config=dict(config))
    assert subscription == same


def test_a_subscription_without_config_has_the_defaults() -> None:
    assert Subscription(id="s1", protocol="HTTP", sink="http://sink.example/").delivery == DEFAULTS


def test_a_stored_value_this_release_refuses_takes_its_default_and_keeps_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A record written by a release with other bounds: the refused member takes its default
    (with a warning naming it), and the members next to it keep their values."""
    config = {"concurrency": 1000, "ratelimit": 5, "deadlettersink": "https://dead.example/"}
    with caplog.at_level(logging.WARNING, logger="cebroker.subscriptions"):
        settings = stored_delivery_settings(config)
    assert settings == DeliverySettings(ratelimit=5.0, deadlettersink="https://dead.example/")
    assert "/config/concurrency" in caplog.text
    record = {"id": "s1", "protocol": "HTTP", "sink": "http://sink.example/", "config": config}
    subscription = subscription_from_record(record)
    assert subscription.delivery == settings
    assert subscription.to_record()["config"] == config  # kept as stored


def _realized(body: dict[str, Any]) -> Subscription:
    return realize(body, rules=admission_rules(), subscription_id="s1")


def test_http_settings_are_typed_with_the_defaults_the_api_applies() -> None:
    subscription = _realized({"protocol": "HTTP", "sink": "https://sink.example/"})
    # The API writes the defaults into the wire form, from the dataclass: one place.
    assert subscription.to_json()["protocolsettings"] == {
        "method": default_of(HttpSettings, "method"),
        "contentmode": default_of(HttpSettings, "contentmode"),
    }
    assert subscription.protocol_settings == HttpSettings()
    batching = _realized(
        {
            "protocol": "HTTP",
            "sink": "https://sink.example/",
            "protocolsettings": {
                "contentMode": "Batch",
                "method": "PUT",
                "headers": {"x-a": "1", "x-b": "2"},
            },
        }
    )
    assert batching.protocol_settings == HttpSettings(
        method="PUT", headers=(("x-a", "1"), ("x-b", "2")), contentmode="batch"
    )
    assert isinstance(batching.protocol_settings, HttpSettings)
    assert batching.protocol_settings.batch
    # The wire form keeps what was given (the declared lower-case name, the value as sent).
    assert batching.to_json()["protocolsettings"]["contentmode"] == "Batch"


def test_pull_settings_are_typed_with_the_defaults_the_api_applies() -> None:
    subscription = _realized({"protocol": "PULL", "protocolsettings": {"lockduration": 30}})
    assert subscription.protocol_settings == PullSettings(lockduration=30)
    assert subscription.to_json()["protocolsettings"] == {
        "lockduration": 30,
        "maxdeliverycount": default_of(PullSettings, "maxdeliverycount"),
        "releasedelay": default_of(PullSettings, "releasedelay"),
    }
    again = subscription_from_record(subscription.to_record())
    assert again.protocol_settings == subscription.protocol_settings
    assert again.to_record() == subscription.to_record()


def test_the_settings_only_a_sender_reads_have_no_broker_type() -> None:
    subscription = _realized(
        {"protocol": "NATS", "sink": "nats://127.0.0.1:4222", "protocolsettings": {"subject": "a.b"}}
    )
    assert subscription.protocol_settings is None
    assert subscription.to_json()["protocolsettings"] == {"subject": "a.b", "contentmode": "binary"}


def test_protocol_settings_errors_keep_their_pointers_and_messages() -> None:
    with pytest.raises(ValidationError) as info:
        _realized(
            {
                "protocol": "PULL",
                "protocolsettings": {"lockduration": 0, "releasedelay": "1", "maxdeliverycount": True},
            }
        )
    assert {p.pointer: p.message for p in info.value.problems} == {
        "/protocolsettings/lockduration": "must be between 1 and 300",
        "/protocolsettings/releasedelay": "must be an integer, got a string",
        "/protocolsettings/maxdeliverycount": "must be an integer, got a boolean",
    }
    with pytest.raises(ValidationError) as info:
        _realized(
            {"protocol": "HTTP", "sink": "https://sink.example/", "protocolsettings": {"method": "GET"}}
        )
    assert [(p.pointer, p.message) for p in info.value.problems] == [
        ("/protocolsettings/method", "must be one of 'POST', 'PUT', 'PATCH'")
    ]


def test_a_stored_protocol_setting_in_a_form_not_read_takes_its_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="cebroker.subscriptions"):
        settings = stored_protocol_settings("PULL", {"lockduration": "30", "maxdeliverycount": 3})
    assert settings == PullSettings(maxdeliverycount=3)
    assert "/protocolsettings/lockduration" in caplog.text
    assert stored_protocol_settings("HTTP", {}) == HttpSettings()
    assert stored_protocol_settings("KAFKA", {"topicname": "t"}) is None
    with pytest.raises(KeyError):
        default_of(PullSettings, "nosuchsetting")


def test_the_openapi_document_describes_the_same_defaults() -> None:
    """The API's document states each default from the dataclass too (the request schema is
    generated from the same source as the defaults applied)."""
    pull = SCHEMAS["PULLSettings"]["properties"]
    for name in ("lockduration", "maxdeliverycount", "releasedelay"):
        assert pull[name]["default"] == default_of(PullSettings, name)
    assert SCHEMAS["HTTPSettings"]["properties"]["method"]["default"] == default_of(HttpSettings, "method")


def _raw_reads(root: Path) -> list[str]:
    """Where a module under ``root`` reads a subscription's ``config`` or ``protocolsettings``
    other than to hand the settings map to a sender's ``Destination``."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        handed = {
            id(keyword.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Destination"
            for keyword in node.keywords
            if keyword.arg == "settings"
        }
        found.extend(
            f"{path.relative_to(root).as_posix()}:{node.lineno} .{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr in ("config", "protocolsettings")
            and id(node) not in handed
        )
    return found


def test_the_pipeline_reads_the_typed_settings_not_the_json() -> None:
    """The pipeline never parses ``config`` or ``protocolsettings`` again: it reads
    ``Subscription.delivery`` and ``Subscription.protocol_settings``. It hands the settings map
    to the senders (they read their own settings), and its transformations compile
    ``config.transform``."""
    pipeline = Path(__file__).resolve().parents[1] / "src" / "cebroker" / "pipeline"
    assert [read.split(":")[0] for read in _raw_reads(pipeline)] == ["transform/programs.py"]
