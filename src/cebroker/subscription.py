"""The realized subscription: the domain model the API, the pipeline and the storage share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Credential fields that are write-only: stored, used for delivery, never returned or logged.
SECRET_CREDENTIAL_FIELDS = frozenset({"secret", "accesstoken", "refreshtoken"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """A realized subscription: validated, defaults applied, ``id`` assigned by the broker.

    ``revision`` increases on every replace and is the basis of the ETag.
    """

    id: str
    protocol: str
    sink: str
    source: str | None = None
    types: tuple[str, ...] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    filters: tuple[Mapping[str, Any], ...] = ()
    protocolsettings: Mapping[str, Any] = field(default_factory=dict)
    sinkcredential: Mapping[str, Any] | None = None
    revision: int = 1

    @property
    def etag(self) -> str:
        """A strong ETag that changes whenever the subscription is replaced."""
        return f'"{self.id}-{self.revision}"'

    def to_json(self, *, include_secrets: bool = False) -> dict[str, Any]:
        """The subscription as the API returns it; secrets are left out unless asked for."""
        doc: dict[str, Any] = {"id": self.id}
        if self.source is not None:
            doc["source"] = self.source
        if self.types is not None:
            doc["types"] = list(self.types)
        doc["config"] = dict(self.config)
        doc["filters"] = [dict(f) for f in self.filters]
        doc["sink"] = self.sink
        doc["protocol"] = self.protocol
        doc["protocolsettings"] = dict(self.protocolsettings)
        if self.sinkcredential is not None:
            cred = dict(self.sinkcredential)
            if not include_secrets:
                cred = {k: v for k, v in cred.items() if k not in SECRET_CREDENTIAL_FIELDS}
            doc["sinkcredential"] = cred
        return doc


def subscription_from_json(doc: Mapping[str, Any], *, revision: int = 1) -> Subscription:
    """Build a :class:`Subscription` from its JSON form (as produced by ``to_json``).

    The document is trusted: it was validated before it was stored.
    """
    types = doc.get("types")
    credential = doc.get("sinkcredential")
    return Subscription(
        id=doc["id"],
        protocol=doc["protocol"],
        sink=doc["sink"],
        source=doc.get("source"),
        types=tuple(types) if types is not None else None,
        config=dict(doc.get("config", {})),
        filters=tuple(dict(f) for f in doc.get("filters", ())),
        protocolsettings=dict(doc.get("protocolsettings", {})),
        sinkcredential=dict(credential) if credential is not None else None,
        revision=revision,
    )
