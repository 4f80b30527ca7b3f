"""The pipeline's subscription rules, declared for the Subscriptions API, so that bad values are
refused at create/replace time with a pointer instead of being discovered at delivery.

* ``protocolsettings.contentmode`` for HTTP: ``binary`` (default), ``structured`` or ``batch``.
* ``config`` keys of :mod:`cebroker.pipeline.policy` (retry policy, concurrency, rate limit,
  dead-letter sink, ordering, batches, where a subscription starts).
* ``config.transform`` (:mod:`cebroker.pipeline.transform`): an expression that does not
  compile, or costs more than the transformations' budget, is refused with its reason and
  position.
* ``config.reply`` (:mod:`cebroker.pipeline.dispatch.replies`): ``publish`` or ``off``.
"""

from __future__ import annotations

from typing import Any

from cebroker.errors import ValidationError
from cebroker.pipeline.dispatch.replies import CONFIG_KEY as REPLY_KEY
from cebroker.pipeline.dispatch.replies import reply_mode_problems
from cebroker.pipeline.policy import POLICY_KEYS, parse_policy
from cebroker.pipeline.transform import CONFIG_KEY as TRANSFORM_KEY
from cebroker.pipeline.transform import transform_problems
from cebroker.subscription_rules import ConfigKeyRule, SettingRule, SubscriptionRules, ValueCheck

CONTENT_MODES = ("binary", "structured", "batch")


def _content_mode(value: Any) -> list[str]:
    if not isinstance(value, str) or value.lower() not in CONTENT_MODES:
        return ["must be 'binary', 'structured' or 'batch'"]
    return []


def _policy_check(key: str) -> ValueCheck:
    def check(value: Any) -> list[str]:
        try:
            parse_policy({key: value})
        except ValidationError as exc:
            return [problem.message for problem in exc.problems]
        return []

    return check


SUBSCRIPTION_RULES = SubscriptionRules(
    settings=(
        SettingRule(
            protocol="HTTP",
            name="contentmode",
            check=_content_mode,
            schema={"type": "string", "enum": list(CONTENT_MODES), "default": "binary"},
            default="binary",
        ),
    ),
    config_keys=(
        *(ConfigKeyRule(name=key, check=_policy_check(key)) for key in POLICY_KEYS),
        ConfigKeyRule(name=TRANSFORM_KEY, check=transform_problems),
        ConfigKeyRule(name=REPLY_KEY, check=reply_mode_problems),
    ),
)
