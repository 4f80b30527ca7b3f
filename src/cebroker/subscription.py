"""The realized subscription: the domain model the API, the pipeline and the storage share."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ceprotocols.endpoint import redact_text

from cebroker.subscription_settings.delivery import DeliverySettings, stored_delivery_settings
from cebroker.subscription_settings.protocols import ProtocolSettings, stored_protocol_settings

#: Credential fields that are write-only: stored, used for delivery, never returned or logged.
SECRET_CREDENTIAL_FIELDS = frozenset({"secret", "accesstoken", "refreshtoken"})
#: The ``protocolsettings`` member of an HTTP subscription holding its webhook secret (write-only).
WEBHOOK_SECRET = "webhooksecret"
#: The protocol of a subscription whose consumers receive its events (pull delivery): no sink.
PULL = "PULL"
#: The URLs of a subscription besides its sink: its dead-letter sink and its token endpoint.
DEAD_LETTER_SINK = "deadlettersink"
TOKEN_ENDPOINT = "refreshtokenendpoint"


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries user information (a user name, a password, a token) before its
    host: the API refuses such URLs, since a URL is listed, queried by and logged."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return "@" in url
    return "@" in netloc


def urls_with_userinfo(subscription: Subscription) -> Iterator[str]:
    """The JSON Pointers of ``subscription``'s URLs that carry user information (possible only
    in subscriptions stored by a release that accepted them)."""
    if has_userinfo(subscription.sink):
        yield "/sink"
    dead = subscription.config.get(DEAD_LETTER_SINK)
    if isinstance(dead, str) and has_userinfo(dead):
        yield f"/config/{DEAD_LETTER_SINK}"
    endpoint = (subscription.sinkcredential or {}).get(TOKEN_ENDPOINT)
    if isinstance(endpoint, str) and has_userinfo(endpoint):
        yield f"/sinkcredential/{TOKEN_ENDPOINT}"


@dataclass(frozen=True, slots=True)
class RetiredSecret:
    """A webhook secret replaced by a newer one, still signing deliveries until ``until``
    (seconds since the epoch), so that receivers can switch over."""

    secret: str = field(repr=False)
    until: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """A realized subscription: validated, defaults applied, ``id`` assigned by the broker.

    ``revision`` increases on every replace and is the basis of the ETag. ``tenant`` is the
    tenant of the principal that created it (``None``: created without a tenant, by an admin
    or a broker without authentication); it never changes. ``webhook_secret`` (HTTP) signs
    every delivery, with the ``retired_secrets`` still in their overlap. Secrets are kept out of
    the repr.

    ``config`` and ``protocolsettings`` are the wire form, kept as given (what the API returns
    and a store keeps); ``delivery`` is ``config`` typed and ``protocol_settings`` the typed
    ``protocolsettings`` (HTTP and PULL), derived from them once when the subscription is built
    (:mod:`cebroker.subscription_settings`): the parts read those.
    """

    id: str
    protocol: str
    sink: str
    source: str | None = None
    types: tuple[str, ...] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    filters: tuple[Mapping[str, Any], ...] = ()
    protocolsettings: Mapping[str, Any] = field(default_factory=dict)
    sinkcredential: Mapping[str, Any] | None = field(default=None, repr=False)
    revision: int = 1
    tenant: str | None = None
    webhook_secret: str | None = field(default=None, repr=False)
    retired_secrets: tuple[RetiredSecret, ...] = field(default=(), repr=False)
    #: ``config`` typed (derived: never given, never compared).
    delivery: DeliverySettings = field(init=False, repr=False, compare=False)
    #: ``protocolsettings`` typed, for the protocols the broker reads the settings of (derived).
    protocol_settings: ProtocolSettings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Built from config here, once per realized revision, for every way a subscription comes
        # in (the API, an import, a store); frozen, so it is set past the dataclass's guard.
        object.__setattr__(self, "delivery", stored_delivery_settings(self.config))
        object.__setattr__(
            self, "protocol_settings", stored_protocol_settings(self.protocol, self.protocolsettings)
        )

    @property
    def pull(self) -> bool:
        """Whether consumers receive this subscription's events themselves (no sink, no push)."""
        return self.protocol == PULL

    @property
    def etag(self) -> str:
        """A strong ETag that changes whenever the subscription is replaced."""
        return f'"{self.id}-{self.revision}"'

    def to_json(self, *, include_secrets: bool = False) -> dict[str, Any]:
        """The subscription as the API returns it; secrets are left out unless asked for, and
        the user information of its URLs (stored by an earlier release) is shown as ``***``."""
        doc: dict[str, Any] = {"id": self.id}
        if self.source is not None:
            doc["source"] = self.source
        if self.types is not None:
            doc["types"] = list(self.types)
        doc["config"] = dict(self.config)
        doc["filters"] = [dict(f) for f in self.filters]
        if self.protocol != PULL:  # a PULL subscription has no sink
            doc["sink"] = self.sink if include_secrets else redact_text(self.sink)
        if not include_secrets and isinstance(self.config.get(DEAD_LETTER_SINK), str):
            doc["config"][DEAD_LETTER_SINK] = redact_text(self.config[DEAD_LETTER_SINK])
        doc["protocol"] = self.protocol
        doc["protocolsettings"] = dict(self.protocolsettings)
        if include_secrets and self.webhook_secret is not None:
            doc["protocolsettings"][WEBHOOK_SECRET] = self.webhook_secret
        if self.sinkcredential is not None:
            cred = dict(self.sinkcredential)
            if not include_secrets:
                cred = {k: v for k, v in cred.items() if k not in SECRET_CREDENTIAL_FIELDS}
                if isinstance(cred.get(TOKEN_ENDPOINT), str):
                    cred[TOKEN_ENDPOINT] = redact_text(cred[TOKEN_ENDPOINT])
            doc["sinkcredential"] = cred
        return doc

    def to_record(self) -> dict[str, Any]:
        """Everything a store keeps (secrets, tenant and retired secrets included) as JSON; read
        back with :func:`subscription_from_record`."""
        doc = self.to_json(include_secrets=True)
        if self.tenant is not None:
            doc["tenant"] = self.tenant
        if self.retired_secrets:
            doc["retiredsecrets"] = [{"secret": r.secret, "until": r.until} for r in self.retired_secrets]
        return doc


def subscription_from_json(doc: Mapping[str, Any], *, revision: int = 1) -> Subscription:
    """Build a :class:`Subscription` from its JSON form (as produced by ``to_json``).

    The document is trusted: it was validated before it was stored.
    """
    return subscription_from_record(doc, revision=revision)


def subscription_from_record(
    doc: Mapping[str, Any], *, revision: int = 1, tenant: str | None = None
) -> Subscription:
    """Build a :class:`Subscription` from :meth:`Subscription.to_record` (or ``to_json``); the
    ``tenant`` argument, when given, wins over the document's (a store's indexed column)."""
    types = doc.get("types")
    credential = doc.get("sinkcredential")
    settings = dict(doc.get("protocolsettings", {}))
    secret = settings.pop(WEBHOOK_SECRET, None)
    retired = tuple(
        RetiredSecret(str(item["secret"]), float(item["until"])) for item in doc.get("retiredsecrets", ())
    )
    return Subscription(
        id=doc["id"],
        protocol=doc["protocol"],
        sink=doc.get("sink", ""),
        source=doc.get("source"),
        types=tuple(types) if types is not None else None,
        config=dict(doc.get("config", {})),
        filters=tuple(dict(f) for f in doc.get("filters", ())),
        protocolsettings=settings,
        sinkcredential=dict(credential) if credential is not None else None,
        revision=revision,
        tenant=tenant if tenant is not None else doc.get("tenant"),
        webhook_secret=str(secret) if secret is not None else None,
        retired_secrets=retired,
    )
