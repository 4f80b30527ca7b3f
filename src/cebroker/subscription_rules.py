"""What a part of the broker adds to subscription validation, declared as data.

The Subscriptions API knows every protocol's own settings. Parts that deliver know more: the
pipeline reads ``config`` keys (retry policy, rate limit, dead-letter sink) and content modes,
the protocol bridge reads its senders' settings. Each such part declares them as a
:class:`SubscriptionRules` value; the composition root (:mod:`cebroker.app`) hands every
declaration to the API once, when the broker is built, and the API builds its validator and
its OpenAPI document from them. Nothing is registered at run time, so no behaviour depends on
which module happened to be imported first.

A declared check sees one value and returns what is wrong with it, one message per problem
(empty when the value is fine); the validator files each message under the member's JSON
Pointer. Messages name the member's expected form and never quote the value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Checks one value: the problems found, each as a message (empty when valid).
ValueCheck = Callable[[Any], Sequence[str]]


@dataclass(frozen=True, kw_only=True)
class SettingRule:
    """A ``protocolsettings`` member of ``protocol`` that a part understands.

    ``schema`` (JSON Schema) describes the value in ``/openapi.json``; ``default``, unless None,
    is applied to every realized subscription of the protocol; ``required`` makes the member
    mandatory. A rule may replace the API's own check of the same member.
    """

    protocol: str
    name: str
    check: ValueCheck
    schema: Mapping[str, Any]
    default: Any = None
    required: bool = False


@dataclass(frozen=True, kw_only=True)
class ConfigKeyRule:
    """A ``config`` member a part reads; other ``config`` members are stored as given."""

    name: str
    check: ValueCheck


@dataclass(frozen=True, kw_only=True)
class SubscriptionRules:
    """Everything one part adds to subscription validation."""

    settings: tuple[SettingRule, ...] = ()
    config_keys: tuple[ConfigKeyRule, ...] = ()
