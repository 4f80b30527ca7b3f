"""ceprotocols: CloudEvents protocol bindings, senders and receivers.

Pure bindings (CloudEvent <-> wire message, no IO) and IO adapters behind small Protocols.
This library never imports the broker service.
"""

from importlib.metadata import version as _version

from ceprotocols.errors import (
    BindingError,
    DeliveryError,
    DeliveryRejected,
    DeliveryTimeout,
    DestinationRefused,
    ProtocolError,
    SettingsError,
    TargetUnreachable,
)
from ceprotocols.registry import SENDERS, check_destination, create_sender
from ceprotocols.sender import Destination, Sender

__all__ = [
    "SENDERS",
    "BindingError",
    "DeliveryError",
    "DeliveryRejected",
    "DeliveryTimeout",
    "Destination",
    "DestinationRefused",
    "ProtocolError",
    "Sender",
    "SettingsError",
    "TargetUnreachable",
    "check_destination",
    "create_sender",
]

#: The installed distribution's version (its one source is the repository's VERSION file).
__version__ = _version("ceprotocols")
