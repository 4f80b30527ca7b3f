"""The protocol senders' subscription rules, declared for the Subscriptions API, so that a
subscription the senders could never deliver is refused at create time with a pointer:

* ``protocolsettings.contentmode``: ``binary`` (default) or ``structured`` for MQTT5, AMQP,
  KAFKA and NATS; MQTT3 has structured mode only (MQTT binding 3.1).
* ``protocolsettings.partitionkeyextractor`` (KAFKA): the name of the context attribute whose
  value becomes the record key.
"""

from __future__ import annotations

import re
from typing import Any

from cebroker.subscription_rules import SettingRule, SubscriptionRules, ValueCheck

_ATTRIBUTE = re.compile(r"[a-z0-9]{1,20}")


def _content_mode(*modes: str) -> ValueCheck:
    def check(value: Any) -> list[str]:
        if not isinstance(value, str) or value.lower() not in modes:
            return [f"must be {' or '.join(repr(m) for m in modes)}"]
        return []

    return check


def _attribute_name(value: Any) -> list[str]:
    if not isinstance(value, str) or not _ATTRIBUTE.fullmatch(value):
        return ["must name a context attribute (lower-case letters and digits), like partitionkey"]
    return []


def _content_modes() -> tuple[SettingRule, ...]:
    both = _content_mode("binary", "structured")
    rules = [
        SettingRule(
            protocol=protocol,
            name="contentmode",
            check=both,
            schema={"type": "string", "enum": ["binary", "structured"], "default": "binary"},
            default="binary",
        )
        for protocol in ("MQTT5", "AMQP", "KAFKA", "NATS")
    ]
    rules.append(
        SettingRule(
            protocol="MQTT3",
            name="contentmode",
            check=_content_mode("structured"),
            schema={"type": "string", "enum": ["structured"], "default": "structured"},
            default="structured",
        )
    )
    return tuple(rules)


SUBSCRIPTION_RULES = SubscriptionRules(
    settings=(
        *_content_modes(),
        SettingRule(
            protocol="KAFKA",
            name="partitionkeyextractor",
            check=_attribute_name,
            schema={"type": "string", "pattern": "^[a-z0-9]{1,20}$", "default": "partitionkey"},
        ),
    ),
)
