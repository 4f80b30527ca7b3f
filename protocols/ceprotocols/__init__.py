"""ceprotocols: CloudEvents protocol bindings, senders and receivers.

Pure bindings (CloudEvent <-> wire message, no IO) and IO adapters behind small Protocols.
This library never imports the broker service.
"""

from ceprotocols.errors import (
    BindingError,
    DeliveryError,
    DeliveryRejected,
    DeliveryTimeout,
    ProtocolError,
    TargetUnreachable,
)
from ceprotocols.sender import SENDERS, Destination, Sender

__all__ = [
    "SENDERS",
    "BindingError",
    "DeliveryError",
    "DeliveryRejected",
    "DeliveryTimeout",
    "Destination",
    "ProtocolError",
    "Sender",
    "TargetUnreachable",
]
