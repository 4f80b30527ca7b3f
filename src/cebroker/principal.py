"""Who makes a call: the :class:`Principal` with its tenant and scopes, and the scopes themselves.

Authentication (API keys, OIDC bearer tokens) turns credentials into a principal; the parts read
it to scope what a call sees (a subscription of another tenant is "not found"). Without any
authentication configured, every call is made by :data:`LOCAL`, which may do everything: such
a broker listens on loopback only, so its callers are on the machine already.
"""

from __future__ import annotations

from dataclasses import dataclass

SUBSCRIPTIONS_READ = "subscriptions:read"
SUBSCRIPTIONS_WRITE = "subscriptions:write"
EVENTS_PUBLISH = "events:publish"
DEADLETTERS_MANAGE = "deadletters:manage"
#: Receive and settle a PULL subscription's events (docs/pull.md).
EVENTS_RECEIVE = "events:receive"
REGISTRY_READ = "registry:read"
REGISTRY_WRITE = "registry:write"
METRICS_READ = "metrics:read"
#: Every scope, over every tenant.
ADMIN = "admin"

#: Every scope a credential may carry.
SCOPES = (
    SUBSCRIPTIONS_READ,
    SUBSCRIPTIONS_WRITE,
    EVENTS_PUBLISH,
    EVENTS_RECEIVE,
    DEADLETTERS_MANAGE,
    REGISTRY_READ,
    REGISTRY_WRITE,
    METRICS_READ,
    ADMIN,
)


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    Attributes:
        id: who it is, for the audit log (``key:ops``, ``oidc:<subject>``, ``local``).
        tenant: the tenant its subscriptions belong to; ``None`` only for principals with
            :data:`ADMIN` (or :data:`LOCAL`), whose subscriptions belong to no tenant.
        scopes: what it may do.
    """

    id: str
    tenant: str | None
    scopes: frozenset[str]

    def __post_init__(self) -> None:
        # A principal without a tenant would see no subscription and list every one.
        if self.tenant is None and ADMIN not in self.scopes:
            raise ValueError(f"principal {self.id!r} has no tenant and is not an admin")

    @property
    def admin(self) -> bool:
        """Whether it holds every scope over every tenant."""
        return ADMIN in self.scopes

    def may(self, scope: str) -> bool:
        """Whether it holds ``scope`` (``admin`` holds them all)."""
        return self.admin or scope in self.scopes

    def sees(self, tenant: str | None) -> bool:
        """Whether a subscription of ``tenant`` is visible to it."""
        return self.admin or (self.tenant is not None and tenant == self.tenant)

    @property
    def tenant_filter(self) -> str | None:
        """The tenant a listing is restricted to; ``None`` (everything) for an admin."""
        return None if self.admin else self.tenant


#: The caller of a broker without authentication (loopback only): every scope, no tenant.
LOCAL = Principal("local", None, frozenset({ADMIN}))
