"""Webhook secrets across a create or replace: ``"generate"``, and the overlap of a replaced one.

A subscription's ``protocolsettings.webhooksecret`` is write-only. ``"generate"`` makes the
broker draw one (:func:`ceprotocols.signing.generate_webhook_secret`), shown once in the answer
to that create or replace. When a replace brings a different secret, the one it replaces keeps
signing deliveries (next to the new one) for the overlap, so receivers can switch over; a
replace without a secret ends signing and forgets the retired ones.
"""

from __future__ import annotations

import dataclasses

from ceprotocols.signing import generate_webhook_secret

from cebroker.subscription import RetiredSecret, Subscription

#: The value that asks the broker to generate the secret.
GENERATE = "generate"


def rotate_webhook_secret(
    current: Subscription | None, proposed: Subscription, *, now: float, overlap: float
) -> tuple[Subscription, str | None]:
    """``proposed`` with its secret settled and the secrets still in their overlap.

    Returns:
        The subscription to store, and the generated secret (None if none was generated).
    """
    secret = proposed.webhook_secret
    generated = None
    if secret == GENERATE:
        secret = generated = generate_webhook_secret()
    retired: list[RetiredSecret] = []
    if current is not None and secret is not None:
        retired = [r for r in current.retired_secrets if r.until > now and r.secret != secret]
        if current.webhook_secret is not None and current.webhook_secret != secret and overlap > 0:
            retired.insert(0, RetiredSecret(current.webhook_secret, now + overlap))
    return dataclasses.replace(proposed, webhook_secret=secret, retired_secrets=tuple(retired)), generated
