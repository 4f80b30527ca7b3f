"""Where the broker may connect on a subscriber's behalf, from its settings.

Every destination a subscriber chooses (sinks of every protocol, dead-letter sinks, token
endpoints) is refused when it is, or resolves to, a loopback, private, link-local, shared,
multicast or reserved address (:class:`ceprotocols.egress.NetworkPolicy`), unless
``--allow-sink-networks`` lists its network. One exception keeps the embedded quick start
working: a broker whose API listens on loopback only and asks for no credentials may deliver
to loopback sinks, since its callers are on the machine already. Link-local addresses (cloud
instance metadata) are only ever allowed by a listed network.
"""

from __future__ import annotations

from ceprotocols.egress import NetworkPolicy

from cebroker.settings import Settings


def sink_policy(settings: Settings) -> NetworkPolicy:
    """The network policy of a broker with ``settings``."""
    local = settings.loopback_only and not settings.authenticated
    return NetworkPolicy.from_cidrs(settings.allow_sink_networks, allow_loopback=local)
