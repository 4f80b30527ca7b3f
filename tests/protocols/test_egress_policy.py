"""The network policy without any sender: address classes, allowed networks, the loopback
switch, the subscription-time check with an injected resolver, and the connect-time guard.

Issue "No SSRF through sinks": refused when the host is, or resolves to, a loopback, private
(RFC 1918, fc00::/7), link-local (169.254.0.0/16, fe80::/10), shared (100.64.0.0/10),
multicast or unspecified address, unless an allowed network covers it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from typing import Any

import pytest
from ceprotocols.egress import (
    AddressClass,
    ConnectGuard,
    NetworkPolicy,
    check_destination,
    classify,
    destination_hosts,
    system_resolver,
)
from ceprotocols.errors import DeliveryRejected, DestinationRefused, TargetUnreachable

from protocols.resolvers import MapResolver, RebindingResolver

STRICT = NetworkPolicy()

REFUSED = [
    ("127.0.0.1", AddressClass.LOOPBACK),
    ("127.255.0.9", AddressClass.LOOPBACK),
    ("::1", AddressClass.LOOPBACK),
    ("::ffff:127.0.0.1", AddressClass.LOOPBACK),
    ("10.1.2.3", AddressClass.PRIVATE),
    ("172.16.0.1", AddressClass.PRIVATE),
    ("172.31.255.255", AddressClass.PRIVATE),
    ("192.168.1.1", AddressClass.PRIVATE),
    ("fc00::1", AddressClass.PRIVATE),
    ("fd00:ec2::254", AddressClass.PRIVATE),
    ("::ffff:10.0.0.1", AddressClass.PRIVATE),
    ("64:ff9b::a00:1", AddressClass.PRIVATE),
    ("2002:c0a8:101::1", AddressClass.PRIVATE),
    ("169.254.169.254", AddressClass.LINK_LOCAL),
    ("169.254.0.1", AddressClass.LINK_LOCAL),
    ("fe80::1", AddressClass.LINK_LOCAL),
    ("fe80::1%1", AddressClass.LINK_LOCAL),
    ("::ffff:169.254.169.254", AddressClass.LINK_LOCAL),
    ("100.64.0.1", AddressClass.SHARED),
    ("100.127.255.254", AddressClass.SHARED),
    ("224.0.0.1", AddressClass.MULTICAST),
    ("239.255.255.250", AddressClass.MULTICAST),
    ("ff02::1", AddressClass.MULTICAST),
    ("ff0e::1", AddressClass.MULTICAST),
    ("0.0.0.0", AddressClass.UNSPECIFIED),
    ("0.1.2.3", AddressClass.UNSPECIFIED),
    ("::", AddressClass.UNSPECIFIED),
    ("::ffff:0.0.0.0", AddressClass.UNSPECIFIED),
    ("192.0.2.1", AddressClass.RESERVED),
    ("198.18.0.1", AddressClass.RESERVED),
    ("240.0.0.1", AddressClass.RESERVED),
    ("255.255.255.255", AddressClass.RESERVED),
    ("2001:db8::1", AddressClass.RESERVED),
    ("3fff::1", AddressClass.RESERVED),
    ("100::1", AddressClass.RESERVED),
    ("2001::1", AddressClass.RESERVED),  # Teredo
    ("::127.0.0.1", AddressClass.RESERVED),  # IPv4-compatible (deprecated)
]
PUBLIC = [
    "8.8.8.8",
    "93.184.216.34",
    "1.1.1.1",
    "100.128.0.1",
    "172.32.0.1",
    "2606:4700::1111",
    "::ffff:8.8.8.8",
]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_every_refused_class(address: str, kind: AddressClass) -> None:
    """Each class is recognised, IPv6 forms carrying IPv4 by that IPv4 address, and the reason
    names the address and its class."""
    assert classify(ipaddress.ip_address(address)) is kind
    reason = STRICT.check_address(address)
    assert reason is not None
    assert reason.endswith(kind.value) or f"{kind.value} (" in reason
    assert reason.startswith(str(ipaddress.ip_address(address)))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_accepted(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None
    assert STRICT.check_address(address) is None


def test_reasons_read_well() -> None:
    assert STRICT.check_address("10.1.2.3") == "10.1.2.3 is a private address"
    assert STRICT.check_address("169.254.169.254") == (
        "169.254.169.254 is a link-local address (cloud instance metadata)"
    )
    assert STRICT.check_address("::ffff:127.0.0.1") == "::ffff:7f00:1 (127.0.0.1) is a loopback address"


def test_allow_loopback_allows_loopback_only() -> None:
    """The quick-start switch: loopback in every form, and nothing else."""
    policy = NetworkPolicy(allow_loopback=True)
    for address in ("127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"):
        assert policy.check_address(address) is None
    for address in ("0.0.0.0", "::", "169.254.169.254", "fe80::1", "10.0.0.1"):
        assert policy.check_address(address) is not None


def test_allowed_networks() -> None:
    """A listed network is accepted whatever its class; IPv4-mapped forms count as their IPv4."""
    policy = NetworkPolicy.from_cidrs(["10.20.0.0/16", "fd12::/16"])
    assert policy.check_address("10.20.1.1") is None
    assert policy.check_address("::ffff:10.20.1.1") is None
    assert policy.check_address("fd12::5") is None
    assert policy.check_address("10.21.0.1") == "10.21.0.1 is a private address"
    assert policy.check_address("127.0.0.1") is not None


def test_link_local_only_through_a_listed_network() -> None:
    """Link-local (cloud metadata) is never allowed by the loopback switch, only by a CIDR."""
    assert NetworkPolicy(allow_loopback=True).check_address("169.254.169.254") is not None
    listed = NetworkPolicy.from_cidrs(["169.254.0.0/16", "fe80::/10"])
    assert listed.check_address("169.254.169.254") is None
    assert listed.check_address("fe80::1%1") is None


def test_malformed_cidrs_are_named() -> None:
    with pytest.raises(ValueError, match="'10.1.2.3/8'"):
        NetworkPolicy.from_cidrs(["10.1.2.3/8"])
    with pytest.raises(ValueError, match="'nonsense'"):
        NetworkPolicy.from_cidrs(["nonsense"])
    strings: Any = ("10.0.0.0/8",)  # the mistake under test: text where networks belong
    with pytest.raises(TypeError, match="from_cidrs"):
        NetworkPolicy(allowed=strings)


def test_policy_is_immutable_and_unrestricted_only_when_asked() -> None:
    policy = NetworkPolicy()
    field = "allow_loopback"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(policy, field, True)
    assert policy.restricted
    open_policy = NetworkPolicy.unrestricted()
    assert not open_policy.restricted
    assert open_policy.check_address("169.254.169.254") is None


def test_check_address_wants_an_address() -> None:
    with pytest.raises(ValueError, match="not an IP address"):
        STRICT.check_address("example.com")


# -- subscription time ---------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "kind"), REFUSED)
async def test_names_resolving_to_every_class_are_refused(address: str, kind: AddressClass) -> None:
    resolver = MapResolver({"sink.example": [address]})
    reason = await check_destination("https://sink.example/hook", STRICT, resolver)
    assert reason is not None
    assert reason.startswith("sink.example resolves to ")
    assert kind.value in reason


async def test_reason_names_the_address_and_its_class() -> None:
    resolver = MapResolver({"evil.example": ["10.1.2.3"]})
    assert await check_destination("http://evil.example:8080/x", STRICT, resolver) == (
        "evil.example resolves to 10.1.2.3, a private address"
    )


async def test_one_refused_address_among_public_ones_refuses_the_name() -> None:
    resolver = MapResolver({"mixed.example": ["93.184.216.34", "10.0.0.9"]})
    reason = await check_destination("mqtt://mixed.example", STRICT, resolver)
    assert reason == "mixed.example resolves to 10.0.0.9, a private address"


@pytest.mark.parametrize(
    "sink",
    [
        "http://public.example/hook",
        "https://public.example:8443/hook?x=1",
        "mqtts://public.example",
        "wss://public.example/mqtt",
        "amqp://user:secret@public.example:5672/queue/a",
        "kafka://public.example:9092,8.8.8.8:9092",
        "nats://public.example,1.1.1.1:4222",
        "public.example",
    ],
)
async def test_public_sinks_of_every_scheme_pass(sink: str) -> None:
    resolver = MapResolver({"public.example": ["93.184.216.34"]})
    assert await check_destination(sink, STRICT, resolver) is None
    assert resolver.calls == ["public.example"]


@pytest.mark.parametrize(
    ("sink", "reason"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254 is a link-local address (cloud instance",
        ),
        ("http://[::ffff:169.254.169.254]/", "::ffff:a9fe:a9fe (169.254.169.254) is a link-local"),
        ("http://[fe80::1]:8080/", "fe80::1 is a link-local address"),
        ("https://user@10.0.0.1@93.184.216.34/", None),  # the host is after the last @
        ("http://93.184.216.34@10.0.0.1/", "10.0.0.1 is a private address"),
        ("kafka://8.8.8.8:9092,192.168.0.10:9092", "192.168.0.10 is a private address"),
        ("nats://[fc00::5]:4222", "fc00::5 is a private address"),
        ("amqps://100.64.1.1", "100.64.1.1 is a shared address"),
        ("mqtt://0.0.0.0:1883", "0.0.0.0 is an unspecified address"),
        ("ws://[ff02::1]/mqtt", "ff02::1 is a multicast address"),
    ],
)
async def test_literal_hosts_in_urls(sink: str, reason: str | None) -> None:
    resolver = MapResolver({})
    found = await check_destination(sink, STRICT, resolver)
    if reason is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(reason)
    assert resolver.calls == []  # addresses are not looked up


async def test_unresolvable_names_and_hostless_text() -> None:
    """A name that does not resolve reaches nothing (the connect-time check sees its later
    answers); text without a host is refused rather than waved through."""
    assert await check_destination("http://nowhere.example/", STRICT, MapResolver({})) is None
    reason = await check_destination("http:///path-only", STRICT, MapResolver({}))
    assert reason is not None
    assert reason.startswith("no host to check")


async def test_allowed_networks_and_unrestricted_at_subscription_time() -> None:
    resolver = MapResolver({"internal.example": ["10.20.0.7"]})
    allowed = NetworkPolicy.from_cidrs(["10.20.0.0/16"])
    assert await check_destination("http://internal.example/", allowed, resolver) is None
    assert await check_destination("http://internal.example/", NetworkPolicy.unrestricted(), resolver) is None
    assert resolver.calls == ["internal.example"]  # unrestricted resolves nothing


def test_destination_hosts_follow_the_senders_parsing() -> None:
    assert destination_hosts("https://a.example/x") == [("a.example", 443)]
    assert destination_hosts("kafka://a:1,b:2") == [("a", 1), ("b", 2)]
    assert destination_hosts("nats://[::1]:4222") == [("::1", 4222)]
    assert destination_hosts("mqtt://u:p@h") == [("h", 1883)]
    with pytest.raises(ValueError, match="no host"):
        destination_hosts("  ")


async def test_system_resolver_asks_the_system() -> None:
    found = await system_resolver("localhost", 80)
    assert ipaddress.ip_address("127.0.0.1") in found or ipaddress.ip_address("::1") in found
    with pytest.raises(socket.gaierror):
        await system_resolver("does-not-exist.invalid", 80)


# -- connect time ---------------------------------------------------------------------------------


async def test_guard_refuses_finally_and_reports_unresolvable_as_retryable() -> None:
    guard = ConnectGuard(
        STRICT, MapResolver({"evil.example": ["169.254.169.254"], "ok.example": ["8.8.4.4"]})
    )
    with pytest.raises(DestinationRefused) as refused:
        await guard.addresses("evil.example", 80)
    assert isinstance(refused.value, DeliveryRejected)
    assert not refused.value.retryable
    assert refused.value.status == "destination"
    assert str(refused.value) == (
        "sink evil.example resolves to 169.254.169.254, a link-local address (cloud instance metadata)"
    )
    with pytest.raises(DestinationRefused, match="sink 10.0.0.1 is a private address"):
        await guard.addresses("10.0.0.1", 80)
    with pytest.raises(TargetUnreachable) as unresolved:
        await guard.addresses("gone.example", 80)
    assert unresolved.value.retryable
    assert await guard.addresses("ok.example", 80) == (ipaddress.ip_address("8.8.4.4"),)


async def test_rebinding_is_caught_by_the_second_look() -> None:
    """Public when the subscription is checked, private when the sender connects."""
    resolver = RebindingResolver("rebind.example", "93.184.216.34", "10.0.0.5")
    assert await check_destination("http://rebind.example/", STRICT, resolver) is None
    with pytest.raises(DestinationRefused, match="resolves to 10.0.0.5, a private address"):
        await ConnectGuard(STRICT, resolver).addresses("rebind.example", 80)
