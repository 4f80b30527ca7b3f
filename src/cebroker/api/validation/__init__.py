"""Validation of proposed subscriptions: :func:`realize`, with the :class:`ValidationRules` that
:func:`build_rules` makes from the API's own tables and what other parts declare
(:mod:`cebroker.subscription_rules`)."""

from cebroker.api.validation.credentials import CREDENTIAL_TYPES
from cebroker.api.validation.protocols import ProtocolRules
from cebroker.api.validation.rules import ValidationRules, build_rules
from cebroker.api.validation.subscription import FIELDS, realize

__all__ = [
    "CREDENTIAL_TYPES",
    "FIELDS",
    "ProtocolRules",
    "ValidationRules",
    "build_rules",
    "realize",
]
