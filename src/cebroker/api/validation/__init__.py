"""Validation of proposed subscriptions: one function, :func:`realize`, and the registries that
other parts extend (``PROTOCOLS`` via :func:`register_setting`, ``CONFIG_KEYS`` via
:func:`register_config_key`, ``CREDENTIAL_TYPES``)."""

from cebroker.api.validation.credentials import CREDENTIAL_TYPES
from cebroker.api.validation.protocols import PROTOCOLS, ProtocolRules, register_setting
from cebroker.api.validation.subscription import CONFIG_KEYS, FIELDS, realize, register_config_key

__all__ = [
    "CONFIG_KEYS",
    "CREDENTIAL_TYPES",
    "FIELDS",
    "PROTOCOLS",
    "ProtocolRules",
    "realize",
    "register_config_key",
    "register_setting",
]
