"""Materializing a message definition through its ``basemessage`` chain.

Message Definitions 1.0-rc2, ``basemessage``: follow the chain to its end, take that
message's attributes, then walk back merging each message over its base. Maps merge key by
key, recursively; any other value (including a scalar over a map) replaces the inherited one.
A reference that cannot be found ends the chain without an error; a cycle also ends it (the
spec forbids cycles, and a reader must not loop on bad data).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: Looks a message up by the xid (or URL) a ``basemessage`` holds; None when unknown.
Lookup = Callable[[str], Mapping[str, Any] | None]

#: Attributes that describe the message entity itself rather than what it defines.
_OWN = frozenset({"basemessage", "messageid", "versionid", "self", "xid", "epoch", "createdat", "modifiedat"})


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged onto ``base``: maps recursively, everything else replaced."""
    out = dict(base)
    for key, value in over.items():
        inherited = out.get(key)
        if isinstance(value, Mapping) and isinstance(inherited, Mapping):
            out[key] = merge(inherited, value)
        else:
            out[key] = value
    return out


def resolve(message: Mapping[str, Any], lookup: Lookup, xid: str = "", max_depth: int = 64) -> dict[str, Any]:
    """The message (whose own xid is ``xid``) with every base it extends merged in."""
    chain: list[Mapping[str, Any]] = [message]
    seen: set[str] = {xid} if xid else set()
    current = message
    while len(chain) <= max_depth:
        ref = current.get("basemessage")
        if not isinstance(ref, str) or not ref:
            break
        # "#/messagegroups/..." is a document-view reference to a message of the same registry
        key = (ref[1:] if ref.startswith("#/") else ref.split("#", 1)[0]).rstrip("/")
        if key in seen:
            break  # a cycle
        seen.add(key)
        base = lookup(key)
        if base is None:
            break  # dangling references are not an error
        chain.append(base)
        current = base
    result: dict[str, Any] = {}
    for entry in reversed(chain):
        inherited = {k: v for k, v in entry.items() if k not in _OWN}
        result = merge(result, inherited)
    result.update({k: v for k, v in message.items() if k in _OWN})
    return result
