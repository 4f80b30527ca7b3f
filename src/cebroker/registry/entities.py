"""Common attribute rules: what a client may write, type checks, epoch checks, timestamps."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from cebroker.registry.errors import XRegistryError

#: Attributes the server computes; present in bodies copied from a GET, ignored on input.
_ALWAYS_COMPUTED = frozenset(
    {"self", "shortself", "xid", "isdefault", "metaurl", "versionsurl", "versionscount", "defaultversionurl"}
)


def now_rfc3339() -> str:
    """The current UTC time as an RFC 3339 timestamp with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_timestamp(value: object) -> bool:
    """True when ``value`` is an RFC 3339 timestamp string."""
    if not isinstance(value, str) or "T" not in value.upper():
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def computed_keys(child_collections: Iterable[str]) -> frozenset[str]:
    """Attribute names the server derives for an entity with these child collections."""
    names = set(_ALWAYS_COMPUTED)
    for coll in child_collections:
        names.add(coll + "url")
        names.add(coll + "count")
    return frozenset(names)


def strip_computed(
    body: Mapping[str, Any], computed: frozenset[str], keep: Iterable[str] = ()
) -> dict[str, Any]:
    """``body`` without server-computed attributes (``keep`` names more keys to drop)."""
    drop = computed | set(keep)
    return {k: v for k, v in body.items() if k not in drop}


def check_epoch(body: Mapping[str, Any], current: int, subject: str) -> None:
    """``mismatched_epoch`` unless the body's ``epoch`` is absent, null or equal to ``current``."""
    if "epoch" not in body or body["epoch"] is None:
        return
    given = body["epoch"]
    if not isinstance(given, int) or isinstance(given, bool) or given < 0:
        raise XRegistryError(
            "invalid_attribute", subject, name="epoch", error_detail="must be an unsigned integer"
        )
    if given != current:
        raise XRegistryError("mismatched_epoch", subject, bad_epoch=given, epoch=current)


def check_id_attr(body: Mapping[str, Any], attr: str, expected: str, singular: str, subject: str) -> None:
    """``mismatched_id`` when the body names a different id than the URL or map key."""
    if attr in body and body[attr] is not None and body[attr] != expected:
        raise XRegistryError(
            "mismatched_id", subject, singular=singular, invalid_id=body[attr], expected_id=expected
        )


def _is_str_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def check_common(attrs: Mapping[str, Any], subject: str) -> None:
    """Type checks of the core attributes every entity may carry (``invalid_attribute``)."""
    for name in ("name", "description", "documentation", "icon"):
        if name in attrs and attrs[name] is not None and not isinstance(attrs[name], str):
            raise XRegistryError("invalid_attribute", subject, name=name, error_detail="must be a string")
    if attrs.get("labels") is not None and not _is_str_map(attrs["labels"]):
        raise XRegistryError(
            "invalid_attribute", subject, name="labels", error_detail="must be a map of strings to strings"
        )
    for name in ("createdat", "modifiedat"):
        if attrs.get(name) is not None and not parse_timestamp(attrs[name]):
            raise XRegistryError(
                "invalid_attribute", subject, name=name, error_detail="must be an RFC 3339 timestamp"
            )
    if attrs.get("deprecated") is not None and not isinstance(attrs["deprecated"], dict):
        raise XRegistryError(
            "invalid_attribute", subject, name="deprecated", error_detail="must be an object"
        )
    for name in attrs:
        if not _ATTR_NAME.match(name):
            raise XRegistryError(
                "invalid_attribute", subject, name=name, error_detail="attribute names are [a-z0-9_]"
            )


def merge_attrs(
    old: Mapping[str, Any],
    incoming: Mapping[str, Any],
    *,
    patch: bool,
    now: str,
    preserve: Iterable[str] = (),
) -> dict[str, Any]:
    """New stored attributes: PUT replaces (``preserve`` survives), PATCH merges and ``null`` deletes.

    ``createdat`` survives unless given; ``modifiedat`` becomes ``now`` unless given.
    """
    if patch:
        out = dict(old)
        for k, v in incoming.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
    else:
        out = {k: v for k, v in incoming.items() if v is not None}
        for k in preserve:
            if k in old and k not in out:
                out[k] = old[k]
    out["epoch"] = int(old.get("epoch", 0)) + 1
    out["createdat"] = incoming.get("createdat") or old.get("createdat") or now
    out["modifiedat"] = incoming.get("modifiedat") or now
    return out


_ATTR_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def changed_names(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Names of attributes that differ between two stored forms (bookkeeping ones left out)."""
    names = set(old) | set(new)
    return sorted(n for n in names if n not in ("epoch", "modifiedat") and old.get(n) != new.get(n))
