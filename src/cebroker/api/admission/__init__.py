"""Admission of proposed subscriptions (checked against the rules, defaults applied):
:func:`realize`, with the :class:`ValidationRules` that :func:`build_rules` makes from the API's
own tables and what other parts declare (:mod:`cebroker.subscription_rules`)."""

from cebroker.api.admission.credentials import CREDENTIAL_TYPES
from cebroker.api.admission.protocols import ProtocolRules
from cebroker.api.admission.rules import ValidationRules, build_rules
from cebroker.api.admission.subscription import FIELDS, realize

__all__ = [
    "CREDENTIAL_TYPES",
    "FIELDS",
    "ProtocolRules",
    "ValidationRules",
    "build_rules",
    "realize",
]
