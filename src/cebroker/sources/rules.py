"""Teach the Subscriptions API validator the protocol bridge's settings, so that a subscription
the senders could never deliver is refused at create time with a pointer:

* ``protocolsettings.contentmode``: ``binary`` (default) or ``structured`` for MQTT5, AMQP,
  KAFKA and NATS; MQTT3 has structured mode only (MQTT binding 3.1).
* ``protocolsettings.partitionkeyextractor`` (KAFKA): the name of the context attribute whose
  value becomes the record key.
"""

from __future__ import annotations

import re
from typing import Any

from cebroker.api.validation.problems import Problems
from cebroker.api.validation.protocols import register_setting

_ATTRIBUTE = re.compile(r"[a-z0-9]{1,20}")


def _content_mode(*modes: str) -> Any:
    def check(value: Any, pointer: str, problems: Problems) -> None:
        if not isinstance(value, str) or value.lower() not in modes:
            problems.add(pointer, f"must be {' or '.join(repr(m) for m in modes)}")

    return check


def _attribute_name(value: Any, pointer: str, problems: Problems) -> None:
    if not isinstance(value, str) or not _ATTRIBUTE.fullmatch(value):
        problems.add(
            pointer, "must name a context attribute (lower-case letters and digits), like partitionkey"
        )


def register_protocol_rules() -> None:
    """Register the checks (idempotent)."""
    for protocol in ("MQTT5", "AMQP", "KAFKA", "NATS"):
        register_setting(
            protocol,
            "contentmode",
            _content_mode("binary", "structured"),
            schema={"type": "string", "enum": ["binary", "structured"], "default": "binary"},
            default="binary",
        )
    register_setting(
        "MQTT3",
        "contentmode",
        _content_mode("structured"),
        schema={"type": "string", "enum": ["structured"], "default": "structured"},
        default="structured",
    )
    register_setting(
        "KAFKA",
        "partitionkeyextractor",
        _attribute_name,
        schema={"type": "string", "pattern": "^[a-z0-9]{1,20}$", "default": "partitionkey"},
    )
