"""Admission of proposed subscriptions (checked against the rules, defaults applied):
:func:`realize`, with the :class:`AdmissionRules` that :func:`build_rules` makes from the API's
own tables and what other parts declare (:mod:`cebroker.subscription_rules`)."""

from cebroker.api.admission.credentials import CREDENTIAL_TYPES
from cebroker.api.admission.protocols import ProtocolRules
from cebroker.api.admission.subscription import FIELDS, realize
from cebroker.api.admission.tables import AdmissionRules, build_rules

__all__ = [
    "CREDENTIAL_TYPES",
    "FIELDS",
    "ProtocolRules",
    "AdmissionRules",
    "build_rules",
    "realize",
]
