"""The network check of a subscription's destinations, at create and replace time.

Every address the broker would connect to on the subscriber's behalf (the sink, the dead-letter
sink, the token endpoint of a ``REFRESHTOKEN`` credential) is checked against the broker's
:class:`~ceprotocols.egress.NetworkPolicy`, names resolved: a loopback, private, link-local,
shared, multicast or reserved address is refused with 400 naming the field, unless an allowed
network covers it. The senders check again on the address they connect to, so a name that
resolves elsewhere later (DNS rebinding) is refused then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from ceprotocols.egress import NetworkPolicy, Resolver, check_destination, system_resolver

from cebroker.errors import FieldProblem, ValidationError
from cebroker.subscription import Subscription

#: Seconds a name has to resolve at subscription time; one that takes longer is left to the
#: check at connect time.
RESOLVE_TIMEOUT = 5.0
_TOKEN_ENDPOINTS = ("refreshtokenendpoint", "refreshtokenurl")


def destinations(subscription: Subscription) -> Iterator[tuple[str, str]]:
    """``(pointer, url)`` of every destination of ``subscription``."""
    if not subscription.pull:  # a PULL subscription has no sink
        yield "/sink", subscription.sink
    if subscription.delivery.deadlettersink is not None:
        yield "/config/deadlettersink", subscription.delivery.deadlettersink
    for name in _TOKEN_ENDPOINTS:
        value = (subscription.sinkcredential or {}).get(name)
        if isinstance(value, str):
            yield f"/sinkcredential/{name}", value


@dataclass(frozen=True, slots=True)
class DestinationCheck:
    """The policy destinations are checked against, and how names are resolved."""

    policy: NetworkPolicy
    resolver: Resolver = system_resolver

    async def check(self, subscription: Subscription) -> None:
        """Raise a 400 naming every destination the policy refuses."""
        problems: list[FieldProblem] = []
        for pointer, url in destinations(subscription):
            try:
                reason = await asyncio.wait_for(
                    check_destination(url, self.policy, self.resolver), RESOLVE_TIMEOUT
                )
            except TimeoutError:
                continue  # checked again when connecting
            if reason is not None:
                problems.append(FieldProblem(pointer, f"the broker may not connect there: {reason}"))
        if problems:
            raise ValidationError(problems)
