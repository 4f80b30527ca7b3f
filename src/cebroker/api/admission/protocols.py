"""Per-protocol rules: which sink schemes fit, which ``protocolsettings`` exist, their defaults.

:func:`builtin_protocols` builds the API's own table (protocol name -> :class:`ProtocolRules`);
:mod:`.rules` adds what other parts declare (for example the HTTP content mode), so that the
validator, the defaults and the "known settings" list stay one table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult

from ceprotocols.errors import SettingsError
from ceprotocols.signing import parse_webhook_secret

from cebroker.api.admission import checks
from cebroker.api.admission.checks import Check
from cebroker.api.admission.problems import Problems, child, quote, type_name
from cebroker.subscription_settings.protocols import HTTP_METHODS, HttpSettings, PullSettings, default_of

#: A check across settings that also sees the parsed sink (None when the sink is invalid).
CrossCheck = Callable[[dict[str, Any], SplitResult | None, str, Problems], None]
#: A check of the sink beyond its scheme: (parts, pointer, problems).
SinkCheck = Callable[[SplitResult, str, Problems], None]

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: Headers the sender sets itself; letting a subscription set them would corrupt the request.
_RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding", "connection"})
#: RFC 9110 5.5: a field value has no control character but horizontal tab (CR and LF would
#: inject a header; the HTTP client refuses to send any of them).
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_KAFKA_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: Bounds of a PULL subscription's lock duration (seconds), delivery count and release delay.
MIN_LOCK = 1
MAX_LOCK = 300
MAX_DELIVERY_COUNT = 100
MAX_RELEASE_DELAY = 3600
#: A PULL subscription's settings, each applied with its default when left out.
PULL_SETTINGS = ("lockduration", "maxdeliverycount", "releasedelay")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:(\d{1,5}))?")


@dataclass(kw_only=True)
class ProtocolRules:
    """What a subscription with this ``protocol`` may say.

    ``settings`` maps each known setting to its check; ``required`` names the settings that
    must be present; ``defaults`` are applied to the realized subscription; ``refused`` maps
    settings that belong to a sibling protocol to the reason they are refused here.
    """

    schemes: frozenset[str]
    settings: dict[str, Check] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    defaults: dict[str, Any] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    sink_check: SinkCheck = checks.host_and_port
    cross_checks: list[CrossCheck] = field(default_factory=list)
    #: JSON Schemas of settings other parts declared, merged into the OpenAPI document.
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)


def http_headers(value: Any, pointer: str, problems: Problems) -> None:
    """Header names are RFC 9110 tokens, not set by the sender itself; values have no control
    characters but tab (RFC 9110 5.5)."""
    if not isinstance(value, dict):
        problems.add(pointer, f"must be an object of header names to strings, got {type_name(value)}")
        return
    for name, item in value.items():
        at = child(pointer, name)
        if not _HEADER_NAME.fullmatch(name):
            problems.add(at, "is not a valid HTTP header name")
        elif name.lower() in _RESERVED_HEADERS or name.lower().startswith("ce-"):
            problems.add(at, "is set by the broker when it delivers and cannot be overridden")
        elif not isinstance(item, str):
            problems.add(at, f"must be a string, got {type_name(item)}")
        elif _HEADER_CONTROL.search(item):
            problems.add(at, "must not contain line breaks, NUL or other control characters")


def webhook_secret(value: Any, pointer: str, problems: Problems) -> None:
    """``"generate"`` or ``whsec_`` + base64 of 24 to 64 bytes (never quoted back)."""
    if not isinstance(value, str):
        problems.add(pointer, f"must be a string, got {type_name(value)}")
        return
    if value == "generate":
        return
    try:
        parse_webhook_secret(value)
    except SettingsError as exc:
        problems.add(pointer, f"{exc.reason}, or 'generate' to have the broker make one")


def mqtt_topic(value: Any, pointer: str, problems: Problems) -> None:
    """An MQTT topic name to publish to: no wildcards, no NUL, at most 65535 UTF-8 bytes."""
    if not checks.string(value, pointer, problems):
        return
    if "+" in value or "#" in value:
        problems.add(pointer, "must not contain the wildcards '+' or '#' (it is a topic to publish to)")
    elif "\x00" in value or len(value.encode()) > 65535:
        problems.add(pointer, "must be at most 65535 bytes of UTF-8 without NUL")


def kafka_topic(value: Any, pointer: str, problems: Problems) -> None:
    """A Kafka topic name: 1-249 of ``[A-Za-z0-9._-]``, not ``.`` or ``..``."""
    if checks.string(value, pointer, problems) and (
        not _KAFKA_TOPIC.fullmatch(value) or value in (".", "..")
    ):
        problems.add(pointer, "must be 1-249 characters of letters, digits, '.', '_' or '-'")


def kafka_acks(value: Any, pointer: str, problems: Problems) -> None:
    """Producer acknowledgements: ``"0"``, ``"1"`` or ``"all"`` (``-1``/``"-1"`` mean all)."""
    number = type(value) is int and value in (0, 1, -1)
    if not number and not (isinstance(value, str) and value in ("0", "1", "-1", "all")):
        problems.add(pointer, "must be one of '0', '1', 'all' (or -1, the same as 'all')")


def kafka_bootstrap(parts: SplitResult, pointer: str, problems: Problems) -> None:
    """``kafka://host:port[,host:port...]``: the bootstrap servers are the sink's authority."""
    for server in parts.netloc.split(","):
        match = _HOST_PORT.fullmatch(server)
        if match is None or "@" in server:
            problems.add(pointer, "must be kafka://host:port[,host:port...] (bootstrap servers)")
            return
        if match.group(3) is not None and not 1 <= int(match.group(3)) <= 65535:
            problems.add(pointer, "every bootstrap port must be between 1 and 65535")
            return


def nats_subject(value: Any, pointer: str, problems: Problems) -> None:
    """A NATS subject to publish to: dot-separated non-empty tokens, no wildcards or spaces."""
    if not checks.no_spaces(value, pointer, problems):
        return
    tokens = value.split(".")
    if any(not t for t in tokens):
        problems.add(pointer, "must be dot-separated non-empty tokens, like orders.created")
    elif any(t in ("*", ">") for t in tokens):
        problems.add(pointer, "must not contain the wildcards '*' or '>' (it is a subject to publish to)")


def amqp_target(settings: dict[str, Any], sink: SplitResult | None, pointer: str, problems: Problems) -> None:
    """AMQP needs a target node: ``address``, or else the sink's path."""
    if sink is not None and "address" not in settings and sink.path in ("", "/"):
        problems.add(
            child(pointer, "address"),
            "is required when the sink URI has no path naming the target node",
        )


_MQTT5_ONLY = "applies to MQTT 5 only: use protocol 'MQTT5' or leave it out"


def _mqtt(version: int) -> ProtocolRules:
    settings: dict[str, Check] = {
        "topicname": mqtt_topic,
        "qos": checks.integer(0, 2),
        "retain": checks.boolean,
    }
    refused: dict[str, str] = {}
    if version == 5:
        settings["expiry"] = checks.integer(0, 2**32 - 1)
        settings["userproperties"] = checks.string_map
    else:
        refused = {"expiry": _MQTT5_ONLY, "userproperties": _MQTT5_ONLY}
    return ProtocolRules(
        # ws and wss are MQTT over WebSocket (the request path defaults to /mqtt).
        schemes=frozenset({"mqtt", "mqtts", "ws", "wss"}),
        settings=settings,
        required={"topicname"},
        defaults={"qos": 1, "retain": False},
        refused=refused,
    )


def builtin_protocols() -> dict[str, ProtocolRules]:
    """A fresh copy of the API's own rules per protocol (callers may add to it)."""
    return {
        "HTTP": ProtocolRules(
            schemes=frozenset({"http", "https"}),
            settings={
                "headers": http_headers,
                "method": checks.one_of(*HTTP_METHODS),
                "webhooksecret": webhook_secret,
            },
            defaults={"method": default_of(HttpSettings, "method")},
        ),
        "MQTT3": _mqtt(3),
        "MQTT5": _mqtt(5),
        "AMQP": ProtocolRules(
            schemes=frozenset({"amqp", "amqps"}),
            settings={
                "address": checks.check_string,
                "linkname": checks.check_string,
                "sendersettlementmode": checks.one_of("settled", "unsettled"),
                "linkproperties": checks.string_map,
            },
            defaults={"sendersettlementmode": "unsettled"},
            cross_checks=[amqp_target],
        ),
        "KAFKA": ProtocolRules(
            schemes=frozenset({"kafka"}),
            settings={
                "topicname": kafka_topic,
                "partitionkeyextractor": checks.check_string,
                "clientid": checks.check_string,
                "acks": kafka_acks,
            },
            required={"topicname"},
            defaults={"acks": "all"},
            sink_check=kafka_bootstrap,
        ),
        "NATS": ProtocolRules(
            schemes=frozenset({"nats", "tls"}),
            settings={"subject": nats_subject},
            required={"subject"},
        ),
        # Pull delivery: no sink; consumers receive under a lock (docs/pull.md).
        "PULL": ProtocolRules(
            schemes=frozenset(),
            settings={
                "lockduration": checks.integer(MIN_LOCK, MAX_LOCK),
                "maxdeliverycount": checks.integer(1, MAX_DELIVERY_COUNT),
                "releasedelay": checks.integer(0, MAX_RELEASE_DELAY),
            },
            defaults={name: default_of(PullSettings, name) for name in PULL_SETTINGS},
        ),
    }


_ALIASES = {
    "HTTPS": "use 'HTTP' (an https:// sink selects TLS)",
    "WEBHOOK": "use 'HTTP'",
    "MQTT": "use 'MQTT3' or 'MQTT5'",
    "MQTTS": "use 'MQTT3' or 'MQTT5' (an mqtts:// sink selects TLS)",
    "MQTT311": "use 'MQTT3'",
    "AMQPS": "use 'AMQP' (an amqps:// sink selects TLS)",
    "AMQP1": "use 'AMQP'",
    "APACHEKAFKA": "use 'KAFKA'",
}


def unknown_protocol_message(value: str, protocols: Collection[str]) -> str:
    """Why ``value`` is not one of ``protocols``, with what to use instead when we can guess."""
    known = ", ".join(protocols)
    upper = value.upper().replace(" ", "").replace("_", "").replace(".", "")
    if value.upper() in protocols:
        return f"protocol names are case-sensitive: use {value.upper()!r}"
    if upper in _ALIASES:
        return f"{quote(value)} is not a protocol: {_ALIASES[upper]}"
    return f"unknown protocol {quote(value)}; use one of {known}"
