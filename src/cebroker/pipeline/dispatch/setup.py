"""A subscription's delivery setup: what delivering its current revision needs, owned in one place.

:class:`DeliverySetup` is a value made from one revision of a subscription: its delivery policy
(retries, timeout, concurrency, rate limit, batches), the :class:`Destination` its sender gets
(the webhook secrets it signs with included) and, for an HTTP subscription with
``contentmode: batch``, its :class:`BatchLimits`. :class:`DeliverySetups` makes it once per
revision, and again when a retired webhook secret stops signing; every dispatch part asks it,
and none keeps a copy of its own. The policy is the subscription's typed ``config``
(``Subscription.delivery``, parsed once when the subscription was built: see
:mod:`cebroker.subscription_settings`), read through :func:`policy_of`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from ceprotocols.errors import SettingsError
from ceprotocols.sender import Destination
from ceprotocols.signing import WebhookSecret, WebhookSigning, parse_webhook_secret

from cebroker.clock import Clock
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.subscription import Subscription
from cebroker.subscription_settings.protocols import HttpSettings

log = logging.getLogger("cebroker.pipeline")


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """How a batching lane fills a request: at most ``events`` deliveries and ``size`` bytes of
    JSON (one delivery at least), waiting at most ``delay`` seconds for them."""

    events: int
    size: int
    delay: float


@dataclass(frozen=True, slots=True)
class DeliverySetup:
    """How one revision of a subscription is delivered; see the module docstring.

    ``until`` is when the destination's signing secrets change without a new revision (a
    retired secret's overlap ends; infinity: never)."""

    subscription: Subscription
    policy: DeliveryPolicy
    destination: Destination
    batch: BatchLimits | None
    until: float


def policy_of(subscription: Subscription) -> DeliveryPolicy:
    """The delivery policy of ``subscription``: its typed ``config``."""
    return subscription.delivery


def make_setup(subscription: Subscription, now: float) -> DeliverySetup:
    """The setup of ``subscription``'s revision as of ``now`` (its signing secrets then)."""
    policy = policy_of(subscription)
    signing, until = _signing(subscription, now)
    destination = Destination(
        protocol=subscription.protocol,
        sink=subscription.sink,
        settings=subscription.protocolsettings,
        credential=subscription.sinkcredential,
        timeout=policy.timeout,
        webhook=signing,
    )
    settings = subscription.protocol_settings
    batching = isinstance(settings, HttpSettings) and settings.batch
    batch = BatchLimits(policy.maxbatchsize, policy.maxbatchbytes, policy.maxbatchdelay) if batching else None
    return DeliverySetup(subscription, policy, destination, batch, until)


def _signing(subscription: Subscription, now: float) -> tuple[WebhookSigning | None, float]:
    """The secrets every delivery is signed with at ``now``: the current one, then the replaced
    ones whose overlap has not ended; and when the first of those overlaps ends."""
    until = math.inf
    if subscription.webhook_secret is None:
        return None, until
    texts = [subscription.webhook_secret]
    for retired in subscription.retired_secrets:
        if retired.until > now:
            texts.append(retired.secret)
            until = min(until, retired.until)
    secrets: list[WebhookSecret] = []
    for text in texts:
        try:
            secrets.append(parse_webhook_secret(text))
        except SettingsError:  # validated by the API: only a damaged record gets here
            log.error("subscription %s holds a webhook secret that cannot be used", subscription.id)
    return (WebhookSigning(subscription.id, tuple(secrets)) if secrets else None), until


class DeliverySetups:
    """The current :class:`DeliverySetup` of every subscription delivered, made on first use."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._made: dict[str, DeliverySetup] = {}

    def of(self, subscription: Subscription) -> DeliverySetup:
        """The setup of ``subscription`` (this revision) now."""
        made = self._made.get(subscription.id)
        now = self._clock.now()
        if made is None or made.subscription is not subscription or now >= made.until:
            made = self._made[subscription.id] = make_setup(subscription, now)
        return made

    def forget(self, subscription: str) -> None:
        """The subscription was deleted."""
        self._made.pop(subscription, None)
