"""Teach the Subscriptions API validator the pipeline's settings, so bad values are refused at
create/replace time with a pointer, instead of being discovered at delivery.

* ``protocolsettings.contentmode`` for HTTP: ``binary`` (default) or ``structured``.
* ``config`` keys of :mod:`cebroker.pipeline.policy` (retry policy, concurrency, rate limit,
  dead-letter sink).
"""

from __future__ import annotations

from typing import Any

from cebroker.api.validation import register_config_key
from cebroker.api.validation.problems import Problems
from cebroker.api.validation.protocols import register_setting
from cebroker.errors import ValidationError
from cebroker.pipeline.policy import POLICY_KEYS, parse_policy

CONTENT_MODES = ("binary", "structured")


def _content_mode(value: Any, pointer: str, problems: Problems) -> None:
    if not isinstance(value, str) or value.lower() not in CONTENT_MODES:
        problems.add(pointer, "must be 'binary' or 'structured'")


def _policy_check(key: str) -> Any:
    def check(value: Any, pointer: str, problems: Problems) -> None:
        try:
            parse_policy({key: value})
        except ValidationError as exc:
            for problem in exc.problems:
                problems.add(pointer, problem.message)

    return check


def register_subscription_rules() -> None:
    """Register the checks (idempotent)."""
    register_setting(
        "HTTP",
        "contentmode",
        _content_mode,
        schema={"type": "string", "enum": list(CONTENT_MODES), "default": "binary"},
        default="binary",
    )
    for key in POLICY_KEYS:
        register_config_key(key, _policy_check(key))
