"""Which addresses the broker may connect to on a subscriber's behalf: a pure policy, no IO.

A destination is refused when its address falls in one of the :class:`AddressClass` ranges,
unless a network the operator allowed covers it (or, for loopback only, ``allow_loopback``).
Every other address, the public internet, is allowed. The classes, decided once here:

============== ======================================================== ==============================
class          IPv4                                                     IPv6
============== ======================================================== ==============================
unspecified    0.0.0.0/8 (0.0.0.0 reaches the local host on Linux)      ::
loopback       127.0.0.0/8                                              ::1
link-local     169.254.0.0/16 (cloud instance metadata 169.254.169.254) fe80::/10
private        10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16                fc00::/7 (unique local, also
                                                                        AWS metadata fd00:ec2::254),
                                                                        fec0::/10 (old site-local)
shared         100.64.0.0/10 (carrier-grade NAT; also some clouds'
               metadata, e.g. 100.100.100.200)
multicast      224.0.0.0/4                                              ff00::/8
reserved       every other range the IANA special-purpose registries    every other such range
               do not mark globally reachable (as ``ipaddress``'s       (documentation 2001:db8::/32
               ``is_global`` reads them), plus 240.0.0.0/4 and          and 3fff::/20, discard
               255.255.255.255: 192.0.0.0/24, 192.0.2.0/24,             100::/64, 2001::/23 with
               198.18.0.0/15, 198.51.100.0/24, 203.0.113.0/24           Teredo, IPv4-compatible
                                                                        ::a.b.c.d, ::/8 ...)
============== ======================================================== ==============================

IPv6 forms that carry an IPv4 address are judged by that IPv4 address, since that is what the
packets reach: IPv4-mapped ``::ffff:a.b.c.d`` (the kernel connects to ``a.b.c.d``), NAT64
``64:ff9b::/96`` (a translator forwards to ``a.b.c.d``) and 6to4 ``2002::/16``. So
``::ffff:127.0.0.1`` is loopback and ``64:ff9b::a00:1`` private.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["AddressClass", "IPAddress", "IPNetwork", "NetworkPolicy", "classify", "parse_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressClass(enum.Enum):
    """A range of addresses a subscriber may not make the broker connect to; the value is how a
    reason names it."""

    UNSPECIFIED = "an unspecified address"
    LOOPBACK = "a loopback address"
    LINK_LOCAL = "a link-local address"
    PRIVATE = "a private address"
    SHARED = "a shared address (100.64.0.0/10)"
    MULTICAST = "a multicast address"
    RESERVED = "a reserved address"


def _networks(*cidrs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


_V4: Final[tuple[tuple[AddressClass, tuple[IPNetwork, ...]], ...]] = (
    (AddressClass.UNSPECIFIED, _networks("0.0.0.0/8")),
    (AddressClass.LOOPBACK, _networks("127.0.0.0/8")),
    (AddressClass.LINK_LOCAL, _networks("169.254.0.0/16")),
    (AddressClass.PRIVATE, _networks("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
    (AddressClass.SHARED, _networks("100.64.0.0/10")),
    (AddressClass.MULTICAST, _networks("224.0.0.0/4")),
)
_V6: Final[tuple[tuple[AddressClass, tuple[IPNetwork, ...]], ...]] = (
    (AddressClass.UNSPECIFIED, _networks("::/128")),
    (AddressClass.LOOPBACK, _networks("::1/128")),
    (AddressClass.LINK_LOCAL, _networks("fe80::/10")),
    (AddressClass.PRIVATE, _networks("fc00::/7", "fec0::/10")),
    (AddressClass.MULTICAST, _networks("ff00::/8")),
)
#: Reserved ranges newer than some Python releases' special-purpose tables (RFC 9637).
_V6_RESERVED: Final = _networks("3fff::/20")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
#: The cloud instance metadata address, worth naming in a reason.
_METADATA: Final = ipaddress.IPv4Address("169.254.169.254")


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (``[::1]`` brackets and ``%zone`` suffixes allowed), or ``None``
    when it is a host name."""
    candidate = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        return ipaddress.ip_address(candidate)
    except ValueError:
        return None


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries to (mapped, NAT64, 6to4), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def classify(address: IPAddress) -> AddressClass | None:
    """The class of a refused range ``address`` is in, or ``None`` for a public address."""
    target: IPAddress = embedded_ipv4(address) or address.__class__(int(address))  # no %zone
    table = _V4 if isinstance(target, ipaddress.IPv4Address) else _V6
    for kind, networks in table:
        if any(target in network for network in networks):
            return kind
    if not target.is_global or target.is_reserved:
        return AddressClass.RESERVED
    if isinstance(target, ipaddress.IPv6Address) and any(target in n for n in _V6_RESERVED):
        return AddressClass.RESERVED
    return None


def spoken(address: IPAddress) -> str:
    """``address`` as a reason writes it, with the IPv4 address an IPv6 form carries:
    ``::ffff:7f00:1 (127.0.0.1)``."""
    embedded = embedded_ipv4(address)
    return str(address) if embedded is None else f"{address} ({embedded})"


def describe(address: IPAddress, kind: AddressClass) -> str:
    """How a reason names the class of ``address`` (``a link-local address (cloud metadata)``)."""
    if (embedded_ipv4(address) or address) == _METADATA:
        return f"{kind.value} (cloud instance metadata)"
    return kind.value


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """Where the broker may connect on a subscriber's behalf. Immutable.

    ``NetworkPolicy()`` refuses every :class:`AddressClass`; ``allowed`` lists networks that are
    accepted whatever their class (a listed CIDR is the only way to allow link-local addresses),
    and ``allow_loopback`` accepts loopback addresses (meant for a broker whose API listens on
    loopback without authentication: its callers are on the machine already).
    :meth:`unrestricted` is the explicit "no restriction" policy.

    Attributes:
        allowed: networks accepted whatever their class.
        allow_loopback: accept loopback addresses (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104).
        restricted: ``False`` only for :meth:`unrestricted`: every address is accepted and
            senders do not resolve names themselves.
    """

    allowed: tuple[IPNetwork, ...] = ()
    allow_loopback: bool = False
    restricted: bool = True

    def __post_init__(self) -> None:
        if not all(isinstance(n, ipaddress.IPv4Network | ipaddress.IPv6Network) for n in self.allowed):
            raise TypeError("allowed must be a tuple of ipaddress networks (see NetworkPolicy.from_cidrs)")

    @classmethod
    def unrestricted(cls) -> NetworkPolicy:
        """The policy that accepts every address (tests, trusted embeddings)."""
        return cls(restricted=False)

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str], *, allow_loopback: bool = False) -> NetworkPolicy:
        """A policy allowing the networks written as CIDRs (``10.20.0.0/16``, ``fd00::/8``).

        Raises:
            ValueError: a CIDR is malformed or has host bits set (``10.1.2.3/8``), named in the
                message.
        """
        allowed: list[IPNetwork] = []
        for cidr in cidrs:
            try:
                allowed.append(ipaddress.ip_network(cidr.strip()))
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not a network in CIDR notation: {exc}") from None
        return cls(tuple(allowed), allow_loopback=allow_loopback)

    def refused_class(self, address: IPAddress) -> AddressClass | None:
        """The class that makes ``address`` refused, or ``None`` when it is accepted."""
        if not self.restricted:
            return None
        kind = classify(address)
        if kind is None or self._listed(address):
            return None
        if kind is AddressClass.LOOPBACK and self.allow_loopback:
            return None
        return kind

    def check_address(self, address: IPAddress | str) -> str | None:
        """Why ``address`` is refused (``10.1.2.3 is a private address``), or ``None``.

        Raises:
            ValueError: ``address`` is a string that is not an IP address.
        """
        parsed = address if not isinstance(address, str) else parse_address(address)
        if parsed is None:
            raise ValueError(f"{address!r} is not an IP address")
        kind = self.refused_class(parsed)
        return None if kind is None else f"{spoken(parsed)} is {describe(parsed, kind)}"

    def _listed(self, address: IPAddress) -> bool:
        if not self.allowed:
            return False
        candidates = [address.__class__(int(address))]  # without a %zone, which networks lack
        embedded = embedded_ipv4(address)
        if embedded is not None:
            candidates.append(embedded)
        return any(c in network for c in candidates for network in self.allowed)
