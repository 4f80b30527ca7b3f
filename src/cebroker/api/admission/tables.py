"""The validator's tables, built once from the API's own rules and what other parts declare.

:func:`build_rules` is called by the composition root with every part's
:class:`~cebroker.subscription_rules.SubscriptionRules`; the result is handed to the
Subscriptions API, which validates with it and describes it in its OpenAPI document. The
tables are not changed afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from cebroker.api.admission.checks import Check
from cebroker.api.admission.problems import Problems
from cebroker.api.admission.protocols import ProtocolRules, builtin_protocols
from cebroker.subscription_rules import SubscriptionRules, ValueCheck


@dataclass(frozen=True, slots=True)
class AdmissionRules:
    """What a subscription may say: rules per protocol and the checked ``config`` keys."""

    protocols: Mapping[str, ProtocolRules]
    #: ``config`` keys the broker understands (key -> check); other keys are stored as given.
    config_keys: Mapping[str, Check]


def _filed(check: ValueCheck) -> Check:
    """A declared check as the validator runs it: each message filed under the member's pointer."""

    def run(value: Any, pointer: str, problems: Problems) -> None:
        for message in check(value):
            problems.add(pointer, message)

    return run


def build_rules(*declared: SubscriptionRules) -> AdmissionRules:
    """The API's own rules plus every declaration.

    Raises:
        ValueError: when a declaration names an unknown protocol, or two declarations claim the
            same setting or ``config`` key (a mistake in how the broker is put together).
    """
    protocols = builtin_protocols()
    config_keys: dict[str, Check] = {}
    claimed: set[tuple[str, str]] = set()
    for part in declared:
        for setting in part.settings:
            rules = protocols.get(setting.protocol)
            if rules is None:
                raise ValueError(
                    f"a rule for {setting.name!r} names the unknown protocol {setting.protocol!r}"
                )
            if (setting.protocol, setting.name) in claimed:
                raise ValueError(f"{setting.protocol} setting {setting.name!r} is declared twice")
            claimed.add((setting.protocol, setting.name))
            rules.settings[setting.name] = _filed(setting.check)
            rules.schemas[setting.name] = dict(setting.schema)
            rules.refused.pop(setting.name, None)
            if setting.default is not None:
                rules.defaults[setting.name] = setting.default
            if setting.required:
                rules.required.add(setting.name)
        for key in part.config_keys:
            if key.name in config_keys:
                raise ValueError(f"config key {key.name!r} is declared twice")
            config_keys[key.name] = _filed(key.check)
    return AdmissionRules(MappingProxyType(protocols), MappingProxyType(config_keys))
