"""Egress control: which addresses the broker may connect to on a subscriber's behalf.

Sinks, dead-letter sinks, token endpoints and webhook handshakes are chosen by subscribers, so
without a check they would let anyone make the broker reach its own loopback, the private
network or the cloud metadata service (server-side request forgery). This package holds:

- :class:`NetworkPolicy` and :func:`classify` (pure): which address classes are refused, which
  networks are allowed anyway;
- :func:`check_destination`: the check at subscription time, with an injectable resolver;
- :class:`ConnectGuard`: the check every sender makes right before connecting, on the address it
  connects to, so that a name that resolves elsewhere at connect time (DNS rebinding) is refused
  with :class:`~ceprotocols.errors.DestinationRefused` instead of being reached.
"""

from ceprotocols.egress.addresses import AddressClass, IPAddress, IPNetwork, NetworkPolicy, classify
from ceprotocols.egress.resolution import (
    ConnectGuard,
    Resolver,
    check_destination,
    destination_hosts,
    system_resolver,
)
from ceprotocols.errors import DestinationRefused

__all__ = [
    "AddressClass",
    "ConnectGuard",
    "DestinationRefused",
    "IPAddress",
    "IPNetwork",
    "NetworkPolicy",
    "Resolver",
    "check_destination",
    "classify",
    "destination_hosts",
    "system_resolver",
]
