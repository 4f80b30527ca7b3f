"""The pipeline's subscription rules, declared for the Subscriptions API, so that bad values are
refused at create/replace time with a pointer instead of being discovered at delivery.

* ``protocolsettings.contentmode`` for HTTP: ``binary`` (default), ``structured`` or ``batch``.
* ``config`` keys of :mod:`cebroker.subscription_settings.delivery` (retry policy, concurrency,
  rate limit, dead-letter sink, ordering, batches, where a subscription starts, replies), checked
  by the one parser that makes every subscription's typed ``delivery``.
* ``config.transform`` (:mod:`cebroker.pipeline.transform`): an expression that does not
  compile, or costs more than the transformations' budget, is refused with its reason and
  position.
"""

from __future__ import annotations

from typing import Any

from cebroker.errors import ValidationError
from cebroker.pipeline.transform import CONFIG_KEY as TRANSFORM_KEY
from cebroker.pipeline.transform import transform_problems
from cebroker.subscription_rules import ConfigKeyRule, SettingRule, SubscriptionRules, ValueCheck
from cebroker.subscription_settings.delivery import SETTINGS_KEYS, parse_delivery_settings
from cebroker.subscription_settings.protocols import HTTP_CONTENT_MODES, HttpSettings, default_of

CONTENT_MODES = HTTP_CONTENT_MODES
_DEFAULT_MODE = default_of(HttpSettings, "contentmode")


def _content_mode(value: Any) -> list[str]:
    if not isinstance(value, str) or value.lower() not in CONTENT_MODES:
        return ["must be 'binary', 'structured' or 'batch'"]
    return []


def _settings_check(key: str) -> ValueCheck:
    def check(value: Any) -> list[str]:
        try:
            parse_delivery_settings({key: value})
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
            schema={"type": "string", "enum": list(CONTENT_MODES), "default": _DEFAULT_MODE},
            default=_DEFAULT_MODE,
        ),
    ),
    config_keys=(
        *(ConfigKeyRule(name=key, check=_settings_check(key)) for key in SETTINGS_KEYS),
        ConfigKeyRule(name=TRANSFORM_KEY, check=transform_problems),
    ),
)
