"""Per-tenant event policies (``--tenant-policies FILE``): what a tenant may publish and receive.

::

    {"tenants": {"acme": {"receive": "source LIKE '/acme/%'", "publish": "source LIKE '/acme/%'"}}}

Both are CloudEvents SQL expressions. ``receive`` is conjoined with the own filters of each of
the tenant's subscriptions inside the subscription index, so it costs no second pass over the
matches; ``publish`` is checked on every event a principal of the tenant sends to ``/events``
(a batch with one refused event is refused whole). A tenant without an entry, a principal with
``admin`` and the operator's protocol sources are not restricted. A file that cannot be read or
holds an expression that does not compile stops the broker at start with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cefilters

from cebroker.errors import ConfigurationError

_MEMBERS = ("receive", "publish")


@dataclass(frozen=True, slots=True)
class TenantPolicy:
    """One tenant's expressions (``None``: not restricted that way)."""

    receive: str | None = None
    publish: str | None = None
    publish_filter: cefilters.Filter | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class TenantPolicies:
    """Every tenant's policy; tenants not listed are not restricted."""

    tenants: Mapping[str, TenantPolicy] = field(default_factory=dict)

    def receive_filter(self, tenant: str | None) -> dict[str, Any] | None:
        """The filter expression conjoined with the filters of ``tenant``'s subscriptions."""
        policy = self.tenants.get(tenant) if tenant is not None else None
        return {"sql": policy.receive} if policy is not None and policy.receive else None

    def may_publish(self, tenant: str | None, event: Mapping[str, Any]) -> bool:
        """Whether ``tenant``'s publish policy accepts ``event`` (true without one)."""
        policy = self.tenants.get(tenant) if tenant is not None else None
        if policy is None or policy.publish_filter is None:
            return True
        return policy.publish_filter.matches(event)


def parse_tenant_policies(text: str, source: str) -> TenantPolicies:
    """The policies of a file's text.

    Raises:
        ConfigurationError: naming the file, the tenant and the member, and why.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{source}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tenants"), dict) or set(doc) != {"tenants"}:
        raise ConfigurationError(f'{source}: expected an object {{"tenants": {{"<tenant>": {{...}}}}}}')
    tenants: dict[str, TenantPolicy] = {}
    for tenant, entry in doc["tenants"].items():
        where = f"{source}: tenant {tenant!r}"
        if not tenant:
            raise ConfigurationError(f"{source}: a tenant name is empty")
        if not isinstance(entry, dict) or not set(entry) <= set(_MEMBERS):
            raise ConfigurationError(f"{where}: expected an object with 'receive' and/or 'publish'")
        compiled: dict[str, cefilters.Filter] = {}
        for member in _MEMBERS:
            expression = entry.get(member)
            if expression is None:
                continue
            if not isinstance(expression, str) or not expression.strip():
                raise ConfigurationError(f"{where}: {member!r} must be a CloudEvents SQL expression")
            try:
                compiled[member] = cefilters.compile([{"sql": expression}])
            except cefilters.FilterError as exc:
                reason = f"{where}: {member!r} is not valid CloudEvents SQL: {exc.message}"
                raise ConfigurationError(reason) from None
        tenants[tenant] = TenantPolicy(entry.get("receive"), entry.get("publish"), compiled.get("publish"))
    return TenantPolicies(tenants)


def load_tenant_policies(path: Path | None) -> TenantPolicies:
    """The policies of the file at ``path``; none when ``path`` is None."""
    if path is None:
        return TenantPolicies()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise ConfigurationError(f"{path}: cannot read the tenant policies: {exc}") from None
    return parse_tenant_policies(text, str(path))
